//! The machine driven the way its Durable Object drives it, step by step, on a virtual clock:
//! [`queue`] (admission, the turn, the bound, answers), [`recovery`] (late answers, relearns,
//! restarts, chains, force release), [`tracking`] (to inclusion, resubmission, states).

mod queue;
mod recovery;
mod strict;
mod tracking;

use super::*;
use crate::ordering::answer::AnswerClass;
use std::collections::BTreeMap;

const SETTINGS: Settings = Settings {
    gap_wait_ms: 1_000,
    max_queue: 3,
    idempotency_ttl_ms: 60_000,
    replacement: ReplacementPolicy::Forward,
    max_hold_ms: 10_000,
    track_interval_ms: 0,
    track_ttl_ms: 600_000,
    pool: PoolKind::Mempool,
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
    hash: TxHash,
    nonce: u64,
    deadline_ms: u64,
}

/// The object's side: carries out the actions and records them.
struct Rig {
    s: Sender,
    now: u64,
    tickets: u64,
    answers: BTreeMap<Ticket, Vec<(Answer, Option<u64>)>>,
    sends: Vec<SendCall>,
    lookups: Vec<(LookupId, Query)>,
    rows: BTreeMap<TxHash, Row>,
    chain: Option<String>,
    alarm: Option<u64>,
    metrics: Vec<Metric>,
    /// Every action in order, as a short word, for ordering checks.
    log: Vec<String>,
}

impl Rig {
    fn new(settings: Settings) -> Self {
        let mut s = Sender::new(settings);
        s.set_address("0xabc");
        Rig {
            s,
            now: 1_000,
            tickets: 0,
            answers: BTreeMap::new(),
            sends: Vec::new(),
            lookups: Vec::new(),
            rows: BTreeMap::new(),
            chain: None,
            alarm: None,
            metrics: Vec::new(),
            log: Vec::new(),
        }
    }

    fn drain(&mut self) {
        while let Some(action) = self.s.poll_action() {
            match action {
                Action::Answer {
                    ticket,
                    answer,
                    retry_after_s,
                } => {
                    self.log.push(format!("answer {}", ticket.0));
                    self.answers
                        .entry(ticket)
                        .or_default()
                        .push((answer, retry_after_s));
                }
                Action::Store(row) => {
                    self.log.push(format!("store {}", row.nonce));
                    self.rows.insert(row.hash, row);
                }
                Action::Forget(hashes) => {
                    for hash in hashes {
                        self.rows.remove(&hash);
                    }
                }
                Action::Wipe => {
                    self.log.push("wipe".into());
                    self.rows.clear();
                    self.chain = None;
                }
                Action::Vacate => {
                    self.log.push("vacate".into());
                    self.rows.clear();
                    self.chain = None;
                    self.alarm = None;
                }
                Action::StoreChain(genesis) => self.chain = Some(genesis),
                Action::Load(hashes) => {
                    self.log.push(format!("load {}", hashes.len()));
                    let rows: Vec<Loaded> = hashes
                        .iter()
                        .filter_map(|hash| self.rows.get(hash))
                        .map(Loaded::from)
                        .collect();
                    self.s.loaded(rows, self.now);
                }
                Action::Send {
                    session_key,
                    hash,
                    nonce,
                    deadline_ms,
                    ..
                } => {
                    self.log.push(format!("send {nonce}"));
                    self.sends.push(SendCall {
                        key: session_key,
                        hash,
                        nonce,
                        deadline_ms,
                    });
                }
                Action::Lookup { id, query, .. } => {
                    self.log.push("lookup".into());
                    self.lookups.push((id, query));
                }
                Action::Alarm(at) => self.alarm = at,
                Action::Emit(metric) => self.metrics.push(metric),
            }
        }
    }

    fn arrival(nonce: u64, variant: u8) -> Arrival {
        Arrival {
            hash: h(nonce, variant),
            nonce,
            request: format!("request {nonce}/{variant}").into(),
            request_id: None,
            sync: false,
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
            call.hash,
            call.nonce,
            Sent {
                class,
                answer,
                attempts: 1,
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

    fn at(&mut self, now: u64) {
        self.now = now;
        self.s.timeout(now);
        self.drain();
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
