//! `eth_getLogs` over any range (docs/getlogs.md): a range goes as asked while no cap is known
//! and it is within the known one; one the upstream refuses as too wide (its words,
//! [`refusal::read`]), or wider than the cap known (learned, or `GETLOGS_UPSTREAM_RANGE`), is asked
//! as aligned pieces ([`pieces::pieces`]), at most [`MAX_IN_FLIGHT`] of the request's at once,
//! each through the read cache as any read (`X-Cache: HIT` only when every piece hit), and
//! merged as text ([`merge::merge`]). A piece refused for its results is halved; a piece that
//! fails otherwise fails the request with its error: never a silently short answer. Above the
//! finalized block each log's block hash is checked against the chain the cache holds, and the
//! head before and after: a reorg while the pieces were asked makes the unfinalized ones asked
//! again, of the upstream.

use super::{Backend, Relay};
use crate::jsonrpc::{Answer, Request, Response, RpcError, INVALID_PARAMS, LIMIT_EXCEEDED};
use crate::upstream::logs::merge::{self, log_blocks};
use crate::upstream::logs::pieces::{self, Piece};
use crate::upstream::logs::refusal::{self, Said};
use crate::upstream::logs::{piece_params, range_of, Bound, MAX_IN_FLIGHT};
use futures_util::stream::{self, StreamExt};

/// How many times the unfinalized pieces are asked again after a reorg moved them.
const REORG_ROUNDS: usize = 3;
/// How many times a range is planned again under a lower cap learned from its pieces.
const RANGE_ROUNDS: usize = 6;

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
        let settings = self.config.logs;
        let Some(bounds) = range_of(&req.params).filter(|_| settings.split) else {
            return self.read_as_asked(req).await;
        };
        let chain = self.config.chain_key();
        let cap = self
            .backend
            .log_limits()
            .and_then(|l| l.borrow().range_cap(chain, settings.upstream_range));
        if let Some(cap) = cap {
            if let Some((from, to)) = self.resolve(bounds).await {
                if to - from >= cap {
                    return self.split(req, from, to, cap).await;
                }
            }
        }
        let answer = self.read_as_asked(req).await;
        let said = refusal::read(200, &answer.render());
        let length = |(a, b): (u64, u64)| b.saturating_sub(a) + 1;
        if let Some(Said::RangeCap {
            blocks: Some(blocks),
            ..
        }) = said
        {
            self.learn_range(blocks);
        }
        let Some((from, to)) = self.resolve(bounds).await.filter(|(f, t)| t > f) else {
            return answer;
        };
        // Narrower than what was refused, whatever the refusal said: a provider counting its
        // cap otherwise, or a cap not said, still gets smaller pieces.
        let size = match said {
            Some(Said::RangeCap { blocks, suggested }) => blocks.or(suggested.map(length)),
            // A result cap's suggested range fits where the logs are dense; elsewhere larger
            // pieces do, so the size is the smallest from it up that the pieces allowed cover.
            Some(Said::ResultCap { suggested }) => {
                Some(self.fitting(from, to, suggested.map_or(1, length)))
            }
            _ => return answer,
        };
        let size = size.unwrap_or(u64::MAX).min(to - from);
        self.split(req, from, to, size).await
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

    /// Learns that an upstream of the chain takes at most `blocks` blocks per `eth_getLogs`; a
    /// lower cap is a `getlogs_cap` line (blocks).
    fn learn_range(&self, blocks: u64) {
        let Some(limits) = self.backend.log_limits() else {
            return;
        };
        if limits
            .borrow_mut()
            .learn_range(self.config.chain_key(), blocks)
        {
            self.backend.emit(
                &crate::metrics::Metric::new("getlogs_cap", "", "range")
                    .value("blocks", blocks as f64),
            );
        }
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
    async fn resolve(&self, (from, to): (Bound, Bound)) -> Option<(u64, u64)> {
        let head = if from.needs_head() || to.needs_head() {
            self.ask_best_head().await?
        } else {
            0
        };
        let (from, to) = (from.at(head)?, to.at(head)?);
        (from <= to).then_some((from, to))
    }

    /// `req`'s range `from..=to` asked as pieces of at most `cap` blocks, merged; refused
    /// (-32602, `query exceeds max block range N`: geth's and reth's words) before any ask when
    /// it needs more than `GETLOGS_MAX_PIECES` or spans more than `GETLOGS_MAX_RANGE`. A piece
    /// refused for its range lowers the cap (learned), and the range is planned again with it
    /// (the pieces answered stay in the cache), at most [`RANGE_ROUNDS`] times.
    async fn split(&self, req: &Request, from: u64, to: u64, cap: u64) -> Response {
        let mut cap = cap;
        for _ in 0..RANGE_ROUNDS {
            let planned = match self.plan_pieces(from, to, cap) {
                Ok(planned) => planned,
                Err(error) => return Response::error(&req.response_id(), &error),
            };
            let answers = self.ask_checked(req, &planned).await;
            if !answers
                .iter()
                .any(|a| matches!(a, PieceAnswer::RangeCapped(_)))
            {
                return self.merged(req, answers);
            }
            let learned = self.backend.log_limits().and_then(|l| {
                l.borrow()
                    .range_cap(self.config.chain_key(), self.config.logs.upstream_range)
            });
            cap = learned.filter(|&c| c < cap).unwrap_or(cap / 2).max(1);
        }
        let error = RpcError::new(
            LIMIT_EXCEEDED,
            "the upstream kept refusing the pieces' ranges",
        );
        Response::error(&req.response_id(), &error)
    }

    /// The pieces of `from..=to` under `cap`; the refusal when they are more than
    /// `GETLOGS_MAX_PIECES` or the range is over `GETLOGS_MAX_RANGE`.
    fn plan_pieces(&self, from: u64, to: u64, cap: u64) -> Result<Vec<Piece>, RpcError> {
        let settings = self.config.logs;
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
    async fn ask_checked(&self, req: &Request, planned: &[Piece]) -> Vec<PieceAnswer> {
        let asked = std::cell::Cell::new(planned.len());
        let mut answers = self.ask_pieces(req, planned, &asked, false).await;
        for _ in 0..REORG_ROUNDS {
            let moved = self.moved_by_reorg(planned, &answers).await;
            if moved.is_empty() {
                break;
            }
            let again: Vec<Piece> = moved.iter().map(|&i| planned[i]).collect();
            let fresh = self.ask_pieces(req, &again, &asked, true).await;
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
    /// itself (`fresh`: past the cache) or as reads. `asked` counts the pieces asked, halves
    /// included, within `GETLOGS_MAX_PIECES` twice over.
    async fn ask_pieces(
        &self,
        req: &Request,
        pieces: &[Piece],
        asked: &std::cell::Cell<usize>,
        fresh: bool,
    ) -> Vec<PieceAnswer> {
        stream::iter(pieces.iter().copied())
            .map(|piece| self.ask_piece(req, piece, asked, fresh))
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
        asked: &'s std::cell::Cell<usize>,
        fresh: bool,
    ) -> futures_util::future::LocalBoxFuture<'s, PieceAnswer> {
        Box::pin(async move {
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
            if let Some(Said::RangeCap { blocks, .. }) = said {
                // This piece was refused: the cap is below it, whatever the words counted.
                let below = piece.blocks() - 1;
                self.learn_range(blocks.map_or(below, |b| b.min(below)));
                return PieceAnswer::RangeCapped(response);
            }
            match halves {
                Some((a, b)) if asked.get() + 2 <= 2 * self.config.logs.max_pieces => {
                    asked.set(asked.get() + 2);
                    let first = self.ask_piece(req, a, asked, fresh).await;
                    let PieceAnswer::Logs(first) = first else {
                        return first;
                    };
                    match self.ask_piece(req, b, asked, fresh).await {
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
