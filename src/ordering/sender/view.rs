//! The per-sender view for operators (`GET /senders/{address}`).

use super::{Phase, Sender};
use crate::ordering::queue::Stage;
use serde_json::{json, Value};

impl Sender {
    /// The state at `now_ms` as JSON: the holder with the lowest nonce (session key, held ms,
    /// nonce, phase: `checking`, `sending` or `recovering`), how many hold the lock (`window`:
    /// the send window's members), the waiting transactions' count and nonces (and how many are
    /// being checked by hash), the next and mined nonce as known, whether the nonce lookup runs,
    /// the lowest nonce refused for a bound while free (`refused_hole`: nothing above it is taken
    /// until it is), the 20 most recent accepted transactions (nonce, age in ms, whether the
    /// upstream vouched for them, their status: `pending`, `included` with its block,
    /// `replaced`, `expired`, and how often they were resubmitted), how many transactions are in
    /// the object, the chain's genesis hash, how many accepted ones it remembers (`remembered`,
    /// final ones included), how many are tracked (`tracked`) and how many of
    /// those are outstanding (`outstanding`: not passed by the mined count; the bound counts
    /// these), when the next tracking check is due and whether one runs, when the storage alarm
    /// is due (ms from now), and the counters.
    pub fn view(&self, now_ms: u64) -> Value {
        let holders: Vec<Value> = self
            .holders
            .iter()
            .map(|holding| {
                let phase = match holding.phase {
                    Phase::Checking(_) => "checking",
                    Phase::Sending { .. } => "sending",
                    Phase::Recovering(_) => "recovering",
                };
                json!({
                    "session_key": holding.session_key.to_string(),
                    "held_ms": now_ms.saturating_sub(holding.acquired_ms),
                    "nonce": holding.nonce,
                    "expected_nonce": holding.expected,
                    "phase": phase,
                })
            })
            .collect();
        let queued: Vec<u64> = self.queue.waiting().map(|place| place.nonce).collect();
        let checking = self
            .queue
            .iter()
            .filter(|(_, e)| matches!(e.stage(), Stage::Admitting(..)))
            .count();
        let accepted: Vec<Value> = self
            .accepted
            .recent(20, now_ms)
            .into_iter()
            .map(|(hash, tx)| {
                let mut v = tx.describe(&hash);
                v["age_ms"] = now_ms.saturating_sub(tx.at_ms).into();
                v["vouched"] = tx.vouched.into();
                v
            })
            .collect();
        json!({
            "holder": holders.first(),
            "window": holders.len(),
            "queue_depth": queued.len(),
            "queued_nonces": queued,
            "checking": checking,
            "next_nonce": self.nonces.next,
            "mined_nonce": self.nonces.mined,
            "looking_up_nonce": self.nonces.lookup.running.is_some(),
            "refused_hole": self.nonces.hole.map(|hole| hole.nonce),
            "in_flight": self.queue.len(),
            "accepted": accepted,
            "chain": self.storage.chain.genesis,
            "upstream_pool": self.settings.pool.label(),
            "remembered": self.accepted.len(),
            "tracked": self.accepted.pending().len(),
            "outstanding": self.accepted.outstanding(self.nonces.mined),
            "next_check_ms": self.tracking.due_ms.map(|due| due.saturating_sub(now_ms)),
            "tracking_check_running": self.tracking.running,
            "alarm_ms": (self.alarm_until_ms != 0)
                .then(|| self.alarm_until_ms.saturating_sub(now_ms)),
            "counters": self.counters,
        })
    }
}
