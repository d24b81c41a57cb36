//! One call over several upstreams as a pure state machine ([`Race`]): which upstream gets the
//! call's bytes and when, and which answer is the call's. No clock and no I/O, in the shape of
//! the sender's machine ([`crate::ordering::sender::Sender`], after quinn-proto): events go in
//! ([`Race::handle_reply`], [`Race::handle_timeout`]), actions come out ([`Race::poll_action`]:
//! post to an upstream, record an attempt, probe a node, log a disagreement), and the answer
//! ([`Race::poll_outcome`]). `edge/` performs the posts and the timer ([`Race::poll_timeout`]).
//!
//! Upstreams are positions in the call's set (its [`crate::upstream::route::UpstreamSet`], in
//! preference order); their health is the [`Rotation`]'s, read when the race starts. A race of
//! one upstream posts to it once and judges nothing. With several, by the route's [`Usage`]:
//!
//! - **Hedged** ([`Usage::Hedged`]): the best upstream first; when it has not answered within
//!   its hedge delay ([`Rotation::hedge_delay_ms`], counted again from each event) the next too,
//!   at most [`MAX_TRIED_AT_ONCE`] in all; a failure (no answer, HTTP 5xx/429, a busy node:
//!   [`judge`]) moves the call to the next at once. **Failover** ([`Usage::Failover`], a strict
//!   pool): the same, never hedged. **Broadcast** ([`Usage::Broadcast`]): every healthy upstream
//!   at once ([`Rotation::broadcast`]).
//! - The first usable answer wins. For a transaction ([`CallKind::Send`]) that is the first
//!   acceptance (a result, "already known"); **a refusal answers only once every upstream that
//!   was sent the bytes has answered** (no hedge after it), an acceptance after a refusal wins
//!   ([`Disagreement::AcceptedAfterRefusal`]), and **an unknown outcome beats a refusal**: when
//!   one of them failed in a way that may have let the bytes in (a lost connection, a timeout),
//!   the outcome is that failure ([`Disagreement::RefusedWhileUnknown`]; the sender's holder
//!   retries and checks by hash).
//! - **Merged** ([`Usage::Merged`]): every healthy upstream at once (the first of the order when
//!   none is); the usable answers that came by the first one's arrival and its hedge delay are
//!   merged ([`merge::merge`], in preference order).
//! - **Sticky** ([`Usage::Sticky`], a filter): the preferred upstream ([`Rotation::preferred`]),
//!   once, never hedged, never moved. **Once** ([`Usage::Once`]): the best, once.
//! - Every reply is judged ([`judge`]): what it says of the node's health is recorded
//!   ([`RaceAction::Record`]), and a client's call that failed in a way that says nothing of the
//!   node asks for a probe ([`RaceAction::Probe`]).

use crate::upstream::merge;
use crate::upstream::rotation::{judge, Attempt, Rotation, HEDGE_MAX_MS};
use crate::upstream::route::{CallKind, Usage};
use crate::upstream::{classify, may_have_arrived, UpstreamError, UpstreamReply};
use std::collections::VecDeque;

/// The most upstreams one call goes to when it is not broadcast (the best and two hedges).
pub const MAX_TRIED_AT_ONCE: usize = 3;

/// What the platform does for a race.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaceAction {
    /// POST the call's body to the upstream at this position of the set, and report its reply
    /// with [`Race::handle_reply`].
    Post(usize),
    /// Record what an attempt said of the upstream at `upstream` ([`Rotation::record`]; log a
    /// cool-down it begins).
    Record {
        /// The position in the set.
        upstream: usize,
        /// What the attempt came to.
        attempt: Attempt,
    },
    /// Ask the upstream at this position a question of the relay's own (its chain id) in the
    /// background, judged as one: a client's call to it failed in a way that says nothing of the
    /// node ([`crate::upstream::rotation::Judged::probe`]).
    Probe(usize),
    /// Upstreams disagreed on a transaction: log it (`upstream_disagreement`).
    Disagreement {
        /// How.
        kind: Disagreement,
        /// The one that accepted, or whose outcome is unknown.
        first: usize,
        /// The one that refused.
        second: usize,
    },
}

/// How upstreams disagreed on a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disagreement {
    /// `first` accepted what `second` refused: the acceptance is the answer.
    AcceptedAfterRefusal,
    /// `second` refused, and the send to `first` may have gone in: the outcome is unknown.
    RefusedWhileUnknown,
}

impl Disagreement {
    /// The metric label and the names of its two fields.
    pub fn label(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Disagreement::AcceptedAfterRefusal => {
                ("accepted_after_refusal", "accepted_by", "refused_by")
            }
            Disagreement::RefusedWhileUnknown => {
                ("refused_while_unknown", "unknown_at", "refused_by")
            }
        }
    }
}

/// How the race picks its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One upstream, or one attempt: its reply is the answer.
    Once,
    /// Hedged, failed over or broadcast.
    Race,
    /// Every healthy one, merged.
    Merged,
}

/// One call's race over the upstreams of its set. See the module documentation.
#[derive(Debug)]
pub struct Race {
    kind: CallKind,
    mode: Mode,
    /// Whether replies are judged (several upstreams).
    judged: bool,
    /// Whether a failure moves the call to the next upstream.
    moved_on_failure: bool,
    /// The upstreams it may go to, best first.
    order: Vec<usize>,
    /// How many of `order` were posted.
    next: usize,
    /// How many of `order` it may go to.
    limit: usize,
    /// Posted and not answered: (position, posted at, Unix ms).
    in_flight: Vec<(usize, u64)>,
    /// The hedge delay, ms (none: never hedged).
    hedge_ms: Option<u64>,
    /// When the next hedge goes, Unix ms.
    hedge_at: Option<u64>,
    /// The hedge delay of each upstream as the race began (merged answers), ms.
    hedges: Vec<u64>,
    /// The call's timeout, ms (the answer when nothing at all came).
    timeout_ms: u64,
    /// A send's first refusal.
    refused: Option<(usize, UpstreamReply)>,
    /// The last failure.
    failure: Option<Result<UpstreamReply, UpstreamError>>,
    /// A send's failure that may have let the bytes in.
    unknown: Option<(usize, Result<UpstreamReply, UpstreamError>)>,
    /// Usable answers (merged), and when the first came.
    answers: Vec<(usize, UpstreamReply)>,
    first_at: Option<u64>,
    /// The request, for merging.
    request: String,
    actions: VecDeque<RaceAction>,
    outcome: Option<Result<UpstreamReply, UpstreamError>>,
    /// Whether its outcome was taken ([`Race::poll_outcome`]).
    taken: bool,
}

impl Race {
    /// A race at `now_ms` of a call of `kind` (its text `body`, waiting at most `timeout_ms` per
    /// attempt) over `set` (URLs in preference order) used as `usage`, with the health
    /// `rotation` knows. Its first posts are ready in [`Race::poll_action`]; with no upstream on
    /// the relay's chain its outcome is ready at once.
    pub fn new(
        kind: CallKind,
        usage: Usage,
        rotation: &Rotation,
        set: &[String],
        body: &str,
        timeout_ms: u64,
        now_ms: u64,
    ) -> Race {
        let mut race = Race::unstarted(kind, set.len() > 1, timeout_ms);
        // One upstream is the chain's alone, whatever its health; unless it was found on
        // another chain (a served chain's is asked, README "Several chains").
        if set.len() == 1 && rotation.excluded(&set[0]).is_none() {
            race.order = vec![0];
            race.post_next(now_ms);
            return race;
        }
        let order = rotation.order(set, now_ms);
        if order.is_empty() {
            race.outcome = Some(Err(none_on_chain(rotation, set)));
            return race;
        }
        match usage {
            Usage::Once | Usage::Sticky => race.start_once(usage, rotation, set, order[0], now_ms),
            Usage::Merged => race.start_merged(rotation, set, body, &order, now_ms),
            Usage::Hedged | Usage::Failover | Usage::Broadcast => {
                race.start_raced(usage, rotation, set, order, now_ms);
            }
        }
        race
    }

    /// A race of a call of `kind` that has posted nothing yet: one attempt ([`Mode::Once`]) at
    /// most, no upstream in its order; `judged` when the set has several upstreams, `timeout_ms`
    /// the call's timeout.
    fn unstarted(kind: CallKind, judged: bool, timeout_ms: u64) -> Race {
        Race {
            kind,
            mode: Mode::Once,
            judged,
            moved_on_failure: false,
            order: Vec::new(),
            next: 0,
            limit: 1,
            in_flight: Vec::new(),
            hedge_ms: None,
            hedge_at: None,
            hedges: Vec::new(),
            timeout_ms,
            refused: None,
            failure: None,
            unknown: None,
            answers: Vec::new(),
            first_at: None,
            request: String::new(),
            actions: VecDeque::new(),
            outcome: None,
            taken: false,
        }
    }

    /// Starts a race of one attempt (`usage` [`Usage::Once`] or [`Usage::Sticky`]) at `now_ms`:
    /// posts to the preferred upstream of `set` ([`Rotation::preferred`]) when sticky and there
    /// is one, else to `best` (the first of the order, a position in `set`).
    fn start_once(
        &mut self,
        usage: Usage,
        rotation: &Rotation,
        set: &[String],
        best: usize,
        now_ms: u64,
    ) {
        let first = match usage {
            Usage::Sticky => rotation.preferred(set, now_ms).unwrap_or(best),
            _ => best,
        };
        self.order = vec![first];
        self.post_next(now_ms);
    }

    /// Starts a merged race ([`Usage::Merged`]) at `now_ms`: posts to every healthy upstream of
    /// `order` (positions in `set`, best first) at once, or to the first of `order` when none is
    /// healthy, and keeps the request `body` for merging and each upstream's hedge delay (ms, at
    /// most [`HEDGE_MAX_MS`]) for the wait for more answers.
    fn start_merged(
        &mut self,
        rotation: &Rotation,
        set: &[String],
        body: &str,
        order: &[usize],
        now_ms: u64,
    ) {
        let healthy: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| rotation.healthy(&set[i], now_ms))
            .collect();
        self.order = if healthy.is_empty() {
            order[..1].to_vec()
        } else {
            healthy
        };
        self.mode = Mode::Merged;
        self.limit = self.order.len();
        self.hedges = set
            .iter()
            .map(|k| rotation.hedge_delay_ms(k).min(HEDGE_MAX_MS))
            .collect();
        self.request = body.to_string();
        while self.next < self.limit {
            self.post_next(now_ms);
        }
    }

    /// Starts a hedged, failed over or broadcast race (`usage`) at `now_ms` over `order`
    /// (positions in `set`, best first): a broadcast posts to every upstream
    /// [`Rotation::broadcast`] gives at once, the others to the best, with at most
    /// [`MAX_TRIED_AT_ONCE`] upstreams in all; a hedged race arms its first hedge (the best
    /// upstream's hedge delay, ms).
    fn start_raced(
        &mut self,
        usage: Usage,
        rotation: &Rotation,
        set: &[String],
        order: Vec<usize>,
        now_ms: u64,
    ) {
        self.mode = Mode::Race;
        self.moved_on_failure = usage.moved_on_failure();
        let at_once = if usage == Usage::Broadcast {
            self.order = rotation.broadcast(set, now_ms);
            self.order.len()
        } else {
            self.order = order;
            1
        };
        self.limit = if at_once > 1 {
            self.order.len()
        } else {
            self.order.len().min(MAX_TRIED_AT_ONCE)
        };
        if usage.hedged() {
            self.hedge_ms = Some(rotation.hedge_delay_ms(&set[self.order[0]]));
        }
        while self.next < at_once.min(self.limit) {
            self.post_next(now_ms);
        }
        self.arm_hedge(now_ms);
    }

    /// The next action for the platform, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<RaceAction> {
        self.actions.pop_front()
    }

    /// A merged call waits up to `wait_ms` after its first answer for the others (instead of
    /// the first's hedge delay): when no answer of some upstream is known yet, a lone first
    /// answer (a node stuck behind, the others' first answers slow) must not stand for them all.
    pub fn wait_for_all(&mut self, wait_ms: u64) {
        if self.mode == Mode::Merged {
            for hedge in &mut self.hedges {
                *hedge = (*hedge).max(wait_ms);
            }
        }
    }

    /// When [`Race::handle_timeout`] is due, Unix ms: a hedge to go, or the end of a merged
    /// call's wait for more answers.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.done() {
            return None;
        }
        match self.mode {
            Mode::Race => self.hedge_at,
            Mode::Merged => {
                let (first, _) = self.answers.first()?;
                let hedge = self.hedges.get(*first).copied().unwrap_or(HEDGE_MAX_MS);
                Some(self.first_at?.saturating_add(hedge))
            }
            Mode::Once => None,
        }
    }

    /// The call's answer once it is decided (taken: `Some` once). Replies that come after it
    /// need not be reported.
    #[must_use]
    pub fn poll_outcome(&mut self) -> Option<Result<UpstreamReply, UpstreamError>> {
        let outcome = self.outcome.take();
        self.taken |= outcome.is_some();
        outcome
    }

    /// The call's timeout, ms.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms
    }

    /// Whether the race has its outcome (given or yet to be taken).
    fn done(&self) -> bool {
        self.taken || self.outcome.is_some()
    }

    /// The timer of [`Race::poll_timeout`] fired at `now_ms`.
    pub fn handle_timeout(&mut self, now_ms: u64) {
        if self.done() {
            return;
        }
        match self.mode {
            Mode::Race => {
                if self.hedge_at.is_some_and(|at| now_ms >= at) {
                    self.post_next(now_ms);
                    self.arm_hedge(now_ms);
                }
            }
            Mode::Merged => {
                if self.poll_timeout().is_some_and(|at| now_ms >= at) {
                    self.settle_merged();
                }
            }
            Mode::Once => {}
        }
    }

    /// The upstream at `upstream` replied `reply` at `now_ms` (a reply to a post it was not sent
    /// is ignored; one after the outcome only judges its upstream's health: a node that hangs
    /// on a broadcast's copy is found by it, though another answered).
    pub fn handle_reply(
        &mut self,
        upstream: usize,
        reply: Result<UpstreamReply, UpstreamError>,
        now_ms: u64,
    ) {
        let Some(at) = self.in_flight.iter().position(|(i, _)| *i == upstream) else {
            return;
        };
        let (_, posted_ms) = self.in_flight.remove(at);
        if self.done() {
            if self.judged {
                let latency_ms = now_ms.saturating_sub(posted_ms);
                if let Some(attempt) = judge(self.kind, &reply).attempt.recorded(latency_ms) {
                    self.actions
                        .push_back(RaceAction::Record { upstream, attempt });
                }
            }
            return;
        }
        let usable = if self.judged {
            let judged = judge(self.kind, &reply);
            let latency_ms = now_ms.saturating_sub(posted_ms);
            if let Some(attempt) = judged.attempt.recorded(latency_ms) {
                self.actions
                    .push_back(RaceAction::Record { upstream, attempt });
            }
            if judged.probe {
                self.actions.push_back(RaceAction::Probe(upstream));
            }
            judged.usable
        } else {
            true
        };
        match self.mode {
            Mode::Once => self.outcome = Some(reply),
            Mode::Merged => {
                match reply {
                    Ok(r) if usable => {
                        self.answers.push((upstream, r));
                        self.first_at.get_or_insert(now_ms);
                    }
                    other => self.failure = Some(other),
                }
                if self.in_flight.is_empty() {
                    self.settle_merged();
                }
            }
            Mode::Race => {
                self.raced(upstream, reply, usable, now_ms);
                if self.outcome.is_none() && self.in_flight.is_empty() {
                    self.settle_race();
                } else {
                    self.arm_hedge(now_ms);
                }
            }
        }
    }

    /// A reply in a hedged, failed over or broadcast race.
    fn raced(
        &mut self,
        upstream: usize,
        reply: Result<UpstreamReply, UpstreamError>,
        usable: bool,
        now_ms: u64,
    ) {
        let send = self.kind.is_send();
        if !usable {
            if send && may_have_arrived(&reply) {
                self.unknown = Some((upstream, reply.clone()));
            }
            self.failure = Some(reply);
            if self.refused.is_none() && self.next < self.limit && self.moved_on_failure {
                self.post_next(now_ms);
            }
            return;
        }
        if !send || classify(&reply).0.went_in() {
            if let (true, Some((refused_by, _))) = (send, &self.refused) {
                self.actions.push_back(RaceAction::Disagreement {
                    kind: Disagreement::AcceptedAfterRefusal,
                    first: upstream,
                    second: *refused_by,
                });
            }
            self.outcome = Some(reply);
            return;
        }
        // A refusal: the answer only once every upstream sent the bytes has answered.
        if self.refused.is_none() {
            self.refused = reply.ok().map(|r| (upstream, r));
        }
    }

    /// Nothing in flight and no answer yet: the race's outcome.
    fn settle_race(&mut self) {
        self.outcome = Some(
            match (
                self.refused.take(),
                self.unknown.take(),
                self.failure.take(),
            ) {
                (Some((refused_by, _)), Some((unknown_at, outcome)), _) => {
                    self.actions.push_back(RaceAction::Disagreement {
                        kind: Disagreement::RefusedWhileUnknown,
                        first: unknown_at,
                        second: refused_by,
                    });
                    outcome
                }
                (Some((_, reply)), None, _) => Ok(reply),
                (None, _, Some(failure)) => failure,
                (None, _, None) => Err(UpstreamError::Timeout(self.timeout_ms)),
            },
        );
    }

    /// The merged answer of the usable answers so far (in preference order), or the last
    /// failure.
    fn settle_merged(&mut self) {
        if self.answers.is_empty() {
            let failure = self.failure.take();
            self.outcome = Some(failure.unwrap_or(Err(UpstreamError::Timeout(self.timeout_ms))));
            return;
        }
        let order = &self.order;
        self.answers
            .sort_by_key(|(i, _)| order.iter().position(|o| o == i));
        let bodies: Vec<&str> = self.answers.iter().map(|(_, r)| r.body.as_str()).collect();
        let mut reply = self.answers[0].1.clone();
        if let Some(merged) = merge::merge(&self.request, &bodies) {
            reply.body = merged;
        }
        self.outcome = Some(Ok(reply));
    }

    /// Posts to the next upstream of the order.
    fn post_next(&mut self, now_ms: u64) {
        let Some(&upstream) = self.order.get(self.next) else {
            return;
        };
        self.next += 1;
        self.in_flight.push((upstream, now_ms));
        self.actions.push_back(RaceAction::Post(upstream));
    }

    /// Sets the next hedge `hedge_ms` after `now_ms` while one may go: hedged, no refusal yet,
    /// an upstream left.
    fn arm_hedge(&mut self, now_ms: u64) {
        self.hedge_at = self
            .hedge_ms
            .filter(|_| self.refused.is_none() && self.next < self.limit)
            .map(|ms| now_ms.saturating_add(ms));
    }
}

/// The outcome of a race with no upstream of `set` in `rotation`'s order:
/// [`UpstreamError::OtherChain`] (the first one's reason) when every one was found on another
/// chain, else [`UpstreamError::Unreachable`].
fn none_on_chain(rotation: &Rotation, set: &[String]) -> UpstreamError {
    // Every one found on another chain: the client is told so, not "unreachable".
    let other_chain = set
        .iter()
        .map(|k| rotation.excluded(k))
        .collect::<Option<Vec<_>>>();
    match other_chain.and_then(|why| why.first().copied()) {
        Some(why) => UpstreamError::OtherChain(why.to_string()),
        None => {
            UpstreamError::Unreachable("no upstream on the relay's chain could be reached".into())
        }
    }
}

#[cfg(test)]
mod tests;
