//! `eth_getLogs` over any range (docs/getlogs.md): a range goes as asked while no cap is known
//! and it is within the known one; one the upstream refuses as too wide (its words,
//! [`refusal::read`]), or wider than the smallest cap of the read upstreams (each learned from
//! its refusals by the edge, or `GETLOGS_UPSTREAM_RANGE`: [`Backend::log_range_cap`]), is asked
//! as aligned pieces ([`pieces::pieces`]), at most [`MAX_IN_FLIGHT`] of the request's at once (its
//! batch's members together), each through the read cache as any read (`X-Cache: HIT` only when
//! every piece hit), and merged as text ([`merge::merge`]). A piece refused for its results is
//! halved; a piece that fails otherwise fails the request with its error: never a silently short
//! answer. Above the finalized block each log's block hash is checked against the chain the cache
//! holds, and the head before and after: a reorg while the pieces were asked makes the
//! unfinalized ones asked again, of the upstream.

use super::{Backend, Relay};
use crate::jsonrpc::{Answer, Request, Response, RpcError, INVALID_PARAMS, LIMIT_EXCEEDED};
use crate::upstream::logs::limits;
use crate::upstream::logs::merge::{self, log_blocks};
use crate::upstream::logs::pieces::{self, Piece};
use crate::upstream::logs::refusal::{self, Said};
use crate::upstream::logs::{piece_params, range_of, Bound, MAX_IN_FLIGHT};
use futures_util::stream::{self, StreamExt};

/// How many times the unfinalized pieces are asked again after a reorg moved them.
const REORG_ROUNDS: usize = 3;
/// How many times a range is planned again under a lower cap learned from its pieces.
const RANGE_ROUNDS: usize = 6;

/// A filter's range as block numbers, and the best head asked to make `latest` one, when it
/// was asked.
#[derive(Debug, Clone, Copy)]
struct Blocks {
    from: u64,
    to: u64,
    head: Option<u64>,
}

/// What bounds one split request's asks: how many pieces were asked (halves included, within
/// twice `GETLOGS_MAX_PIECES`) and until when a piece may begin (Unix ms: `UPSTREAM_TIMEOUT_MS`
/// after the split began; Cloudflare counts a request's subrequests, a client waits so long).
struct Budget {
    asked: std::cell::Cell<usize>,
    until_ms: u64,
}

/// What asking one piece came to.
enum PieceAnswer {
    /// Its `result`: a JSON array's text.
    Logs(String),
    /// The request's answer instead (an error): the upstream's, or the relay's.
    Fails(Response),
    /// Refused for its range (the refusal): the range is planned again under a lower cap.
    RangeCapped(Response),
}

/// The id `1`, for the pieces of a notification (which gets no answer, but its pieces must).
fn one() -> Option<crate::jsonrpc::Id> {
    crate::jsonrpc::Id::from_raw(serde_json::value::RawValue::from_string("1".into()).ok()?)
}

impl<B: Backend> Relay<'_, B> {
    /// Answers `req`, an `eth_getLogs`: as asked, or as pieces (see the module documentation).
    pub(super) async fn get_logs(&self, req: &Request) -> Response {
        let Some(bounds) = range_of(&req.params).filter(|_| self.config.logs.split) else {
            return self.read_as_asked(req).await;
        };
        if let Some(cap) = self.backend.log_range_cap() {
            if let Some(blocks) = self.resolve(bounds).await {
                if blocks.to - blocks.from >= cap {
                    return self.split(req, blocks, cap).await;
                }
            }
        }
        let answer = self.read_as_asked(req).await;
        let said = refusal::read(200, &answer.render());
        let length = |(a, b): (u64, u64)| b.saturating_sub(a) + 1;
        if !matches!(said, Some(Said::RangeCap { .. } | Said::ResultCap { .. })) {
            return answer;
        }
        let Some(blocks) = self.resolve(bounds).await.filter(|b| b.to > b.from) else {
            return answer;
        };
        let (from, to) = (blocks.from, blocks.to);
        // Narrower than what was refused, whatever the refusal said: a provider counting its
        // cap otherwise, or a cap not said, still gets smaller pieces.
        let size = match said {
            Some(Said::ResultCap { suggested }) => {
                // A result cap's suggested range fits where the logs are dense; elsewhere larger
                // pieces do, so the size is the smallest from it up that the pieces allowed cover.
                Some(self.fitting(from, to, suggested.map_or(1, length)))
            }
            said => said.and_then(|said| limits::taught(said, Some((from, to)))),
        };
        let size = size.into_iter().chain(self.backend.log_range_cap()).min();
        self.split(req, blocks, size.unwrap_or(to - from)).await
    }

    /// The smallest piece size from `size` up, doubling, whose pieces of `from..=to` are within
    /// `GETLOGS_MAX_PIECES` (a piece refused for its results is then halved where it must be).
    fn fitting(&self, from: u64, to: u64, size: u64) -> u64 {
        let limit = self.config.logs.max_pieces;
        let mut size = size.max(1);
        while size < to - from && pieces::pieces(from, to, size, limit).is_none() {
            size = size.saturating_mul(2);
        }
        size
    }

    /// `req` asked as the client asked it: through the read cache when it is on, else of the
    /// upstream (every read but a split `eth_getLogs`, [`Relay::read`]).
    pub(super) async fn read_as_asked(&self, req: &Request) -> Response {
        match self.backend.read_cache().filter(|_| self.config.cache) {
            Some(cache) => self.cached_read(req, &cache).await,
            None => self.proxy(req).await,
        }
    }

    /// The filter's first and last block as numbers (`latest`: the best head the upstreams
    /// know); `None` for another tag, a head that could not be had, or an empty range.
    async fn resolve(&self, (from, to): (Bound, Bound)) -> Option<Blocks> {
        let head = if from.needs_head() || to.needs_head() {
            Some(self.ask_best_head().await?)
        } else {
            None
        };
        let at = head.unwrap_or(0);
        let (from, to) = (from.at(at)?, to.at(at)?);
        (from <= to).then_some(Blocks { from, to, head })
    }

    /// The refusal of a range whose last block is above every upstream's head, asked now unless
    /// the cache's head or the one asked for `latest` has it (-32602 `block range extends beyond
    /// current head block`: geth's words, execution-apis `filter-error-future-block-range`);
    /// `None` when an upstream has it (its pieces then go each to an upstream that has its
    /// blocks) or no head could be had (the upstreams answer for themselves).
    async fn past_head(&self, blocks: Blocks) -> Option<RpcError> {
        let cached = || {
            let cache = self.backend.read_cache()?;
            let cache = cache.borrow();
            Some(cache.view(self.config.chain_key())?.head()?.number)
        };
        if blocks
            .head
            .or_else(cached)
            .is_some_and(|head| blocks.to <= head)
        {
            return None;
        }
        let head = match blocks.head {
            Some(head) => head,
            None => self.ask_best_head().await?,
        };
        (blocks.to > head).then(|| {
            RpcError::new(
                INVALID_PARAMS,
                "block range extends beyond current head block",
            )
        })
    }

    /// `req`'s `blocks` asked as pieces of at most `cap` blocks, merged; refused before any
    /// ask when it needs more than `GETLOGS_MAX_PIECES` or spans more than `GETLOGS_MAX_RANGE`
    /// (-32602, `query exceeds max block range N`: geth's and reth's words), or when it ends
    /// above every upstream's head ([`Relay::past_head`]). The request's other splits wait (its
    /// pieces in flight are at most [`MAX_IN_FLIGHT`]); none begins past [`Budget::until_ms`]. A
    /// piece refused for its range lowers the cap (the upstream learned it), and the range is
    /// planned again with it (the pieces answered stay in the cache), at most [`RANGE_ROUNDS`]
    /// times.
    async fn split(&self, req: &Request, blocks: Blocks, cap: u64) -> Response {
        let refused = |error: RpcError| Response::error(&req.response_id(), &error);
        let (from, to) = (blocks.from, blocks.to);
        let mut planned = match self.plan_pieces(from, to, cap) {
            Ok(planned) => planned,
            Err(error) => return refused(error),
        };
        if let Some(error) = self.past_head(blocks).await {
            return refused(error);
        }
        let _turn = self.log_pieces.lock().await;
        let budget = Budget {
            asked: std::cell::Cell::new(0),
            until_ms: self
                .backend
                .now_ms()
                .saturating_add(self.config.upstream_timeout_ms),
        };
        let mut cap = cap;
        for round in 0..RANGE_ROUNDS {
            // The first round's pieces were planned before any ask.
            if round > 0 {
                planned = match self.plan_pieces(from, to, cap) {
                    Ok(planned) => planned,
                    Err(error) => return refused(error),
                };
            }
            let answers = self.ask_checked(req, &planned, &budget).await;
            if !answers
                .iter()
                .any(|a| matches!(a, PieceAnswer::RangeCapped(_)))
            {
                return self.merged(req, answers);
            }
            // The upstream that refused a piece learned its cap from it (edge::race).
            let learned = self.backend.log_range_cap();
            cap = learned.filter(|&c| c < cap).unwrap_or(cap / 2).max(1);
        }
        refused(RpcError::new(
            LIMIT_EXCEEDED,
            "the upstream kept refusing the pieces' ranges",
        ))
    }

    /// The pieces of `from..=to` under `cap`; the refusal when they are more than
    /// `GETLOGS_MAX_PIECES` or the range is over `GETLOGS_MAX_RANGE`.
    fn plan_pieces(&self, from: u64, to: u64, cap: u64) -> Result<Vec<Piece>, RpcError> {
        let settings = &self.config.logs;
        let limit = settings.max_pieces;
        let most = settings
            .max_range
            .unwrap_or(u64::MAX)
            .min(pieces::covered(cap, limit));
        pieces::pieces(from, to, cap, limit)
            .filter(|_| to - from < most)
            .ok_or_else(|| {
                RpcError::new(
                    INVALID_PARAMS,
                    format!("query exceeds max block range {most}"),
                )
            })
    }

    /// `planned` asked ([`Relay::ask_pieces`]), and the unfinalized ones asked again of the
    /// upstream while a reorg moved them ([`Relay::moved_by_reorg`], at most [`REORG_ROUNDS`]).
    async fn ask_checked(
        &self,
        req: &Request,
        planned: &[Piece],
        budget: &Budget,
    ) -> Vec<PieceAnswer> {
        budget.asked.set(planned.len());
        let mut answers = self.ask_pieces(req, planned, budget, false).await;
        for _ in 0..REORG_ROUNDS {
            let moved = self.moved_by_reorg(planned, &answers).await;
            if moved.is_empty() {
                break;
            }
            let again: Vec<Piece> = moved.iter().map(|&i| planned[i]).collect();
            let fresh = self.ask_pieces(req, &again, budget, true).await;
            for (i, answer) in moved.into_iter().zip(fresh) {
                answers[i] = answer;
            }
        }
        answers
    }

    /// The pieces' `answers` as the request's: their logs merged, or the first failure.
    fn merged(&self, req: &Request, answers: Vec<PieceAnswer>) -> Response {
        let mut parts = Vec::with_capacity(answers.len());
        for answer in answers {
            match answer {
                PieceAnswer::Logs(logs) => parts.push(logs),
                PieceAnswer::Fails(response) | PieceAnswer::RangeCapped(response) => {
                    return response
                }
            }
        }
        match merge::merge(&parts, self.config.max_upstream_response_bytes) {
            Ok(all) => Response::new(&req.response_id(), Answer::Result(all)),
            Err(e) => Response::error(
                &req.response_id(),
                &RpcError::new(LIMIT_EXCEEDED, e.to_string()),
            ),
        }
    }

    /// Asks `pieces` of `req`, at most [`MAX_IN_FLIGHT`] at once, in order; of the upstream
    /// itself (`fresh`: past the cache) or as reads, within `budget`.
    async fn ask_pieces(
        &self,
        req: &Request,
        pieces: &[Piece],
        budget: &Budget,
        fresh: bool,
    ) -> Vec<PieceAnswer> {
        stream::iter(pieces.iter().copied())
            .map(|piece| self.ask_piece(req, piece, budget, fresh))
            .buffered(MAX_IN_FLIGHT)
            .collect()
            .await
    }

    /// One piece: its logs; a piece refused for its results halved along its alignment and
    /// each half asked (one after the other, in the piece's slot); one refused for its range
    /// lowers the cap learned ([`PieceAnswer::RangeCapped`]); else the failure.
    fn ask_piece<'s>(
        &'s self,
        req: &'s Request,
        piece: Piece,
        budget: &'s Budget,
        fresh: bool,
    ) -> futures_util::future::LocalBoxFuture<'s, PieceAnswer> {
        Box::pin(async move {
            if self.backend.now_ms() >= budget.until_ms {
                let error = RpcError::new(
                    LIMIT_EXCEEDED,
                    format!(
                        "query timeout exceeded: the pieces took over {} ms (UPSTREAM_TIMEOUT_MS); ask a narrower range",
                        self.config.upstream_timeout_ms
                    ),
                );
                return PieceAnswer::Fails(Response::error(&req.response_id(), &error));
            }
            // The client's id, so that a piece's failure is the client's answer as it is.
            let sent = Request {
                id: req.id.clone().or_else(one),
                method: req.method.clone(),
                params: piece_params(&req.params, piece),
            };
            let response = if fresh {
                self.proxy(&sent).await
            } else {
                self.read_as_asked(&sent).await
            };
            let text = response.render();
            let said = refusal::read(200, &text);
            let halves = match said {
                Some(Said::ResultCap { .. }) => pieces::halves(piece),
                _ => None,
            };
            if let Some(Said::RangeCap { .. }) = said {
                // The upstream that refused it learned a cap below it (edge::race).
                return PieceAnswer::RangeCapped(response);
            }
            match halves {
                Some((a, b)) if budget.asked.get() + 2 <= 2 * self.config.logs.max_pieces => {
                    budget.asked.set(budget.asked.get() + 2);
                    let first = self.ask_piece(req, a, budget, fresh).await;
                    let PieceAnswer::Logs(first) = first else {
                        return first;
                    };
                    match self.ask_piece(req, b, budget, fresh).await {
                        PieceAnswer::Logs(second) => {
                            match merge::merge(&[first, second], usize::MAX) {
                                Ok(both) => PieceAnswer::Logs(both),
                                Err(e) => PieceAnswer::Fails(Response::error(
                                    &req.response_id(),
                                    &RpcError::new(LIMIT_EXCEEDED, e.to_string()),
                                )),
                            }
                        }
                        failed => failed,
                    }
                }
                _ => match Answer::parse(&text) {
                    Some(Answer::Result(logs)) if said.is_none() => PieceAnswer::Logs(logs),
                    _ => PieceAnswer::Fails(response),
                },
            }
        })
    }

    /// The positions of the pieces whose logs a reorg moved: with the read cache on, once the
    /// head is asked again (a reorg while the pieces were asked is found by it), a piece above
    /// the finalized block with a log whose block hash is not the one the cache holds at its
    /// number. Without the cache's chain nothing is checked.
    async fn moved_by_reorg(&self, pieces: &[Piece], answers: &[PieceAnswer]) -> Vec<usize> {
        let Some(cache) = self.backend.read_cache().filter(|_| self.config.cache) else {
            return Vec::new();
        };
        let chain = self.config.chain_key();
        let finalized = || {
            cache
                .borrow()
                .view(chain)
                .and_then(|v| v.finalized())
                .unwrap_or(0)
        };
        if pieces.iter().all(|p| p.to <= finalized()) {
            return Vec::new();
        }
        self.ask_head(&cache, chain, &self.config.cache_settings)
            .await;
        let finalized = finalized();
        let cache = cache.borrow();
        let Some(view) = cache.view(chain) else {
            return Vec::new();
        };
        let moved = |logs: &str| {
            log_blocks(logs).is_some_and(|blocks| {
                blocks.iter().any(|(n, hash)| {
                    *n > finalized
                        && view
                            .hash_at(*n)
                            .is_some_and(|known| !known.eq_ignore_ascii_case(hash))
                })
            })
        };
        pieces
            .iter()
            .zip(answers)
            .enumerate()
            .filter(|(_, (piece, answer))| {
                piece.to > finalized && matches!(answer, PieceAnswer::Logs(logs) if moved(logs))
            })
            .map(|(i, _)| i)
            .collect()
    }
}
