//! The machine driven the way its Durable Object drives it, step by step, on a virtual clock:
//! [`queue`] (admission, the turn, the bound, answers), [`recovery`] (late answers, relearns,
//! restarts, chains, force release), [`tracking`] (to inclusion, resubmission, states),
//! [`window`] (several consecutive nonces sent at once, `SEND_WINDOW`); [`strict`]
//! (`UPSTREAM_POOL=strict`); [`limits`] (what one sender's object may keep: rows, bytes, pending).

mod limits;
mod private;
mod queue;
mod recovery;
mod strict;
mod tracking;
mod window;

use super::*;
use crate::ordering::answer::AnswerClass;
use crate::ordering::route_status::RouteStatus;
use crate::ordering::tx::SendMethod;
use std::collections::BTreeMap;

const SETTINGS: Settings = Settings {
    gap_wait_ms: 1_000,
    max_queue: 3,
    max_bytes: 1 << 30,
    send_window: 1,
    idempotency_ttl_ms: 60_000,
    replacement: ReplacementPolicy::Forward,
    max_hold_ms: 10_000,
    track_interval_ms: 0,
    track_ttl_ms: 600_000,
    pool: PoolKind::Mempool,
    private_route: false,
    route_status: false,
    public_after_blocks: None,
};

fn h(nonce: u64, variant: u8) -> TxHash {
    let mut hash = [0u8; 32];
    hash[..8].copy_from_slice(&nonce.to_be_bytes());
    hash[8] = variant;
    hash
}

#[derive(Debug, Clone)]
struct SendCall {
    key: SessionKey,
    tx: Rc<SignedTx>,
    hash: TxHash,
    nonce: u64,
    deadline_ms: u64,
}

/// What the rig's effects recorded.
#[derive(Default)]
struct Recorded {
    now: u64,
    answers: BTreeMap<Ticket, Vec<(Answer, Option<u64>)>>,
    sends: Vec<SendCall>,
    lookups: Vec<(LookupId, Query)>,
    /// Each `Publish`'s hashes, in order.
    published: Vec<Vec<TxHash>>,
    /// Each `Cancel`'s ticket and hash, in order.
    cancels: Vec<(Ticket, TxHash)>,
    rows: BTreeMap<TxHash, Row>,
    /// The cancels' tombstones, stored in place of their rows.
    tombstones: BTreeMap<TxHash, Tombstone>,
    chain: Option<String>,
    alarm: Option<u64>,
    /// How many times an alarm was set (each a billed row written).
    alarm_sets: usize,
    /// What each row keeps of tracking's progress.
    progress: BTreeMap<TxHash, RowProgress>,
    metrics: Vec<Metric>,
    /// Every action in order, as a short word, for ordering checks.
    log: Vec<String>,
    /// The platform's largest row, raw bytes: a bigger one's store fails.
    row_limit: Option<usize>,
    /// Behind several private routes, the one whose answer the next send's is.
    answering_route: Option<usize>,
    /// Each `Cancel`'s routes, in order.
    cancel_routes: Vec<TakenBy>,
}

impl Effects for Recorded {
    fn now_ms(&self) -> u64 {
        self.now
    }
    fn answer(&mut self, ticket: Ticket, answer: Answer, retry_after_s: Option<u64>) {
        self.log.push(format!("answer {}", ticket.0));
        self.answers
            .entry(ticket)
            .or_default()
            .push((answer, retry_after_s));
    }
    fn store(&mut self, row: Row) -> Result<(), Unstorable> {
        if self.row_limit.is_some_and(|limit| row.tx.raw.len() > limit) {
            // As the platform refuses a row too big for it (SQLITE_TOOBIG).
            self.log.push(format!("store refused {}", row.tx.nonce));
            return Err(Unstorable("string or blob too big: SQLITE_TOOBIG".into()));
        }
        self.log.push(format!("store {}", row.tx.nonce));
        self.rows.insert(row.tx.hash, row);
        Ok(())
    }
    fn forget(&mut self, hashes: Vec<TxHash>) {
        for hash in hashes {
            self.rows.remove(&hash);
            self.tombstones.remove(&hash);
        }
    }
    fn release(&mut self, hashes: Vec<TxHash>) {
        // No longer live (the store overwrites such a row with the next one).
        for hash in hashes {
            self.log.push(format!(
                "release {}",
                u64::from_be_bytes(hash[..8].try_into().unwrap())
            ));
            self.rows.remove(&hash);
            self.tombstones.remove(&hash);
        }
    }
    fn wipe(&mut self) {
        self.log.push("wipe".into());
        self.rows.clear();
        self.tombstones.clear();
        self.chain = None;
    }
    fn vacate(&mut self) {
        self.log.push("vacate".into());
        self.rows.clear();
        self.tombstones.clear();
        self.chain = None;
        self.alarm = None;
    }
    fn bury(&mut self, tombstone: Tombstone) {
        self.log.push(format!("bury {}", tombstone.nonce));
        self.rows.remove(&tombstone.hash);
        self.progress.remove(&tombstone.hash);
        self.tombstones.insert(tombstone.hash, tombstone);
    }
    fn store_chain(&mut self, genesis: String) {
        self.chain = Some(genesis);
    }
    fn progress(&mut self, hash: TxHash, progress: RowProgress) {
        if self.rows.contains_key(&hash) {
            self.progress.insert(hash, progress);
        }
    }
    fn load(&mut self, hashes: &[TxHash]) -> Vec<Rc<SignedTx>> {
        self.log.push(format!("load {}", hashes.len()));
        hashes
            .iter()
            .filter_map(|hash| self.rows.get(hash))
            .map(|row| row.tx.clone())
            .collect()
    }
    fn send(
        &mut self,
        key: SessionKey,
        tx: Rc<SignedTx>,
        deadline_ms: u64,
        _request_id: Option<Rc<str>>,
    ) {
        self.log.push(format!("send {}", tx.nonce));
        self.sends.push(SendCall {
            key,
            hash: tx.hash,
            nonce: tx.nonce,
            tx,
            deadline_ms,
        });
    }
    fn lookup(&mut self, id: LookupId, query: Query, _deadline_ms: u64) {
        self.log.push("lookup".into());
        self.lookups.push((id, query));
    }
    fn publish(&mut self, hashes: Vec<TxHash>, _deadline_ms: u64) {
        self.log.push(format!("publish {}", hashes.len()));
        self.published.push(hashes);
    }
    fn cancel(&mut self, ticket: Ticket, hash: TxHash, routes: TakenBy, _deadline_ms: u64) {
        self.log.push(format!("cancel {}", hash[0]));
        self.cancels.push((ticket, hash));
        self.cancel_routes.push(routes);
    }
    fn alarm(&mut self, at_ms: Option<u64>) {
        self.alarm_sets += usize::from(at_ms.is_some());
        self.alarm = at_ms;
    }
    fn emit(&mut self, metric: Metric) {
        self.metrics.push(metric);
    }
}

/// The object's side: carries out the actions ([`Sender::run`]) and records them.
struct Rig {
    s: Sender,
    tickets: u64,
    fx: Recorded,
}

impl std::ops::Deref for Rig {
    type Target = Recorded;
    fn deref(&self) -> &Recorded {
        &self.fx
    }
}

impl std::ops::DerefMut for Rig {
    fn deref_mut(&mut self) -> &mut Recorded {
        &mut self.fx
    }
}

/// The transaction `nonce`/`variant` (its hash [`h`]).
fn tx(nonce: u64, variant: u8) -> Rc<SignedTx> {
    Rc::new(SignedTx {
        hash: h(nonce, variant),
        nonce,
        chain_id: Some(1),
        raw: format!("request {nonce}/{variant}").into_bytes(),
        method: SendMethod::Plain,
        public_after_blocks: None,
        self_cancel: false,
    })
}

/// A stored row of the transaction `nonce`/`variant`, stored at `at_ms`.
fn row(nonce: u64, variant: u8, at_ms: u64) -> Row {
    Row {
        tx: tx(nonce, variant),
        at_ms,
    }
}

impl Rig {
    fn new(settings: Settings) -> Self {
        let mut s = Sender::new(settings);
        s.set_address("0xabc");
        Rig {
            s,
            tickets: 0,
            fx: Recorded {
                now: 1_000,
                ..Recorded::default()
            },
        }
    }

    fn drain(&mut self) {
        self.s.run(&mut self.fx);
    }

    /// A restarted object: `rows` in its storage, restored (on the chain `0xgenesis`).
    fn restored(settings: Settings, rows: &[Row]) -> Self {
        Rig::restored_into(Rig::new(settings), rows)
    }

    /// A new instance after the object lost its memory: `rows` in its storage, each with what
    /// its row kept of tracking's `progress`, restored.
    fn woken(settings: Settings, rows: &[Row], progress: &BTreeMap<TxHash, RowProgress>) -> Self {
        let mut r = Rig::new(settings);
        r.progress = progress.clone();
        Rig::restored_into(r, rows)
    }

    /// [`Rig::restored`] on the rig `r` (whose `progress` the rows kept).
    fn restored_into(mut r: Rig, rows: &[Row]) -> Self {
        for row in rows {
            r.rows.insert(row.tx.hash, row.clone());
        }
        let stored: Vec<RowHeader> = rows
            .iter()
            .map(|row| RowHeader {
                hash: row.tx.hash,
                nonce: row.tx.nonce,
                at_ms: row.at_ms,
                terms: row.tx.terms(),
                progress: r.progress.get(&row.tx.hash).copied().unwrap_or_default(),
            })
            .collect();
        let tombstones: Vec<Tombstone> = r.tombstones.values().copied().collect();
        r.s.restore(Some("0xgenesis".into()), &stored, &tombstones, r.now);
        r.drain();
        r
    }

    fn arrival(nonce: u64, variant: u8) -> Arrival {
        Arrival {
            tx: tx(nonce, variant),
            request_id: None,
        }
    }

    /// A send-and-wait call (EIP-7966) of the transaction `nonce`/`variant`.
    fn sync_arrival(nonce: u64, variant: u8) -> Arrival {
        let mut tx = (*tx(nonce, variant)).clone();
        tx.method = SendMethod::Sync { timeout_ms: 2_000 };
        Arrival {
            tx: Rc::new(tx),
            request_id: None,
        }
    }

    fn ticket(&mut self) -> Ticket {
        self.tickets += 1;
        Ticket(self.tickets)
    }

    fn arrive(&mut self, nonce: u64) -> Ticket {
        self.arrive_variant(nonce, 0)
    }

    fn arrive_variant(&mut self, nonce: u64, variant: u8) -> Ticket {
        let ticket = self.ticket();
        self.s
            .arrive(ticket, Self::arrival(nonce, variant), self.now);
        self.drain();
        ticket
    }

    /// The transaction `nonce`/`variant` with `size` raw bytes.
    fn arrive_sized(&mut self, nonce: u64, variant: u8, size: usize) -> Ticket {
        let mut big = (*tx(nonce, variant)).clone();
        big.raw.resize(size, 0);
        self.arrive_tx(big)
    }

    /// `tx` arrives alone.
    fn arrive_tx(&mut self, tx: SignedTx) -> Ticket {
        let ticket = self.ticket();
        let arrival = Arrival {
            tx: Rc::new(tx),
            request_id: None,
        };
        self.s.arrive(ticket, arrival, self.now);
        self.drain();
        ticket
    }

    fn arrive_all(&mut self, nonces: &[u64]) -> Vec<Ticket> {
        let batch: Vec<(Ticket, Arrival)> = nonces
            .iter()
            .map(|&n| (self.ticket(), Self::arrival(n, 0)))
            .collect();
        let tickets = batch.iter().map(|(t, _)| *t).collect();
        self.s.arrive_all(batch, self.now);
        self.drain();
        tickets
    }

    /// The oldest lookup not yet answered.
    fn lookup(&mut self) -> (LookupId, Query) {
        assert!(
            !self.lookups.is_empty(),
            "a lookup was asked: {:?}",
            self.log
        );
        self.lookups.remove(0)
    }

    /// The oldest lookup not yet answered that asks `what`.
    fn lookup_for(&mut self, what: impl Fn(&Query) -> bool) -> (LookupId, Query) {
        let i = self
            .lookups
            .iter()
            .position(|(_, q)| what(q))
            .unwrap_or_else(|| panic!("such a lookup was asked: {:?}", self.lookups));
        self.lookups.remove(i)
    }

    /// Answers the tracking check when it is due with the mined count `latest` (the pending
    /// count the same: an emptied pool, so every pending one is asked by hash) and what the
    /// upstream says of each hash; returns the check's query (its counts' flags and the hashes
    /// it asked).
    fn track(&mut self, latest: u64, seen: &[(TxHash, Seen)]) -> Query {
        self.track_with(latest, seen, &[], None)
    }

    /// [`Rig::track`], with a private route's statuses and the head.
    fn track_with(
        &mut self,
        latest: u64,
        seen: &[(TxHash, Seen)],
        route: &[(TxHash, RouteStatus)],
        head: Option<u64>,
    ) -> Query {
        self.track_counts(latest, latest, seen, route, head)
    }

    /// The tracking check when it is due: its counts (`latest`, and `pending` when asked) and
    /// then, when it asks by hash, what the upstream says of each hash asked.
    fn track_counts(
        &mut self,
        latest: u64,
        pending: u64,
        seen: &[(TxHash, Seen)],
        route: &[(TxHash, RouteStatus)],
        head: Option<u64>,
    ) -> Query {
        // The newest lookup that asks the mined count and nothing by hash: the check's counts
        // (one already running, or the one asked when it is due).
        let counts = |lookups: &[(LookupId, Query)]| {
            lookups
                .iter()
                .rposition(|(_, q)| q.latest && q.hashes.is_empty() && !q.genesis)
        };
        if counts(&self.lookups).is_none() {
            let due = self.due().expect("a check is due");
            self.at(due);
        }
        let at =
            counts(&self.lookups).unwrap_or_else(|| panic!("a tracking check: {:?}", self.lookups));
        let (id, mut query) = self.lookups.remove(at);
        let found = Found {
            latest: Some(latest),
            pending: query.pending.then_some(pending),
            route: route.iter().copied().collect(),
            head,
            ..Found::default()
        };
        let before = self.lookups.len();
        self.reply(id, Ok(found));
        // Its second step, asked at once: what the counts cannot settle, by hash.
        let by_hash = (self.lookups.len() > before)
            .then(|| self.lookups.last().cloned())
            .flatten()
            .filter(|(_, q)| !q.hashes.is_empty() && !q.latest && !q.pending);
        if let Some((id, asked)) = by_hash {
            self.lookups.pop();
            let known = seen
                .iter()
                .filter(|(hash, _)| asked.hashes.contains(hash))
                .copied()
                .collect();
            query.hashes = asked.hashes;
            self.reply(
                id,
                Ok(Found {
                    known,
                    ..Found::default()
                }),
            );
        }
        query
    }

    /// Answers the holder's check of a resend below the next nonce (the mined count and its
    /// hash): mined count `latest`, and the upstream does not have `hash`, so it is sent.
    fn resend_check(&mut self, latest: u64, hash: TxHash) {
        let (turn, _) = self.lookup_for(|q| q.latest && q.hashes == [hash]);
        self.reply(
            turn,
            Ok(Found {
                latest: Some(latest),
                known: seen(&[(hash, false)]),
                ..Found::default()
            }),
        );
    }

    fn reply(&mut self, id: LookupId, outcome: Outcome) {
        self.s.looked_up(id, outcome, self.now);
        self.drain();
    }

    /// Answers the pending nonce lookup with the counts (and this genesis if asked).
    fn learn(&mut self, pending: u64, latest: u64) {
        let (id, query) = self.lookup_for(|q| q.pending && q.hashes.is_empty());
        assert!(query.latest, "{query:?}");
        let found = Found {
            pending: Some(pending),
            latest: Some(latest),
            genesis: query.genesis.then(|| "0xgenesis".to_string()),
            ..Found::default()
        };
        self.reply(id, Ok(found));
    }

    fn send(&mut self) -> SendCall {
        assert!(!self.sends.is_empty(), "a send: {:?}", self.log);
        self.sends.remove(0)
    }

    fn finish(&mut self, call: &SendCall, class: AnswerClass) {
        let answer = if class.went_in() {
            Answer::hash(&call.hash)
        } else {
            Answer::error(&crate::jsonrpc::RpcError::new(-32000, class.label()))
        };
        self.s.sent(
            call.key,
            &call.tx,
            Sent {
                class,
                answer,
                attempts: 1,
                route: self.answering_route,
            },
            self.now,
        );
        self.drain();
    }

    fn accept_next(&mut self) -> SendCall {
        let call = self.send();
        self.finish(&call, AnswerClass::Accepted);
        call
    }

    /// Time moves to `now`: the storage alarm fires when it is due (as the platform's would),
    /// otherwise the in-memory timer.
    fn at(&mut self, now: u64) {
        self.now = now;
        if self.alarm.is_some_and(|at| at <= now) {
            // The platform deletes an alarm that fired unless its handler sets another; this
            // handler returns at once (the object's waits for quiet: `alarm_done` then).
            self.alarm = None;
            self.s.alarm(now);
            self.drain();
            self.s.alarm_done(now);
        } else {
            self.s.handle_timeout(now);
        }
        self.drain();
    }

    /// The earliest of the in-memory timer's due time and the storage alarm's.
    fn due(&self) -> Option<u64> {
        match (self.s.poll_timeout(), self.alarm) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn answer(&self, ticket: Ticket) -> &(Answer, Option<u64>) {
        let answers = self.answers.get(&ticket).expect("answered");
        assert_eq!(answers.len(), 1, "answered exactly once");
        &answers[0]
    }

    fn error_of(&self, ticket: Ticket) -> (i64, String) {
        self.answer(ticket).0.error_parts().expect("an error")
    }

    fn events(&self, name: &str) -> Vec<&Metric> {
        self.metrics.iter().filter(|m| m.event == name).collect()
    }
}

/// What the upstream says of these hashes: held (in its pool) or not.
fn seen(pairs: &[(TxHash, bool)]) -> std::collections::HashMap<TxHash, Seen> {
    pairs
        .iter()
        .map(|&(hash, held)| (hash, if held { Seen::Pending } else { Seen::Missing }))
        .collect()
}

fn known(pairs: &[(TxHash, bool)]) -> Outcome {
    Ok(Found {
        known: seen(pairs),
        ..Found::default()
    })
}
