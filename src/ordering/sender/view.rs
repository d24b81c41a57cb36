//! The per-sender view for operators (`GET /senders/{address}`).

use super::{Phase, Sender, Stage};
use serde_json::{json, Value};

impl Sender {
    /// The state at `now_ms` as JSON: the holder (session key, held ms, nonce, phase: `checking`,
    /// `sending` or `recovering`), the waiting transactions' count and nonces (and how many are
    /// being checked by hash), the next and mined nonce as known, whether the nonce lookup runs,
    /// the 20 most recent accepted transactions (nonce, age in ms, whether the upstream vouched
    /// for them, their status: `pending`, `included` with its block, `replaced`, `expired`, and
    /// how often they were resubmitted), how many transactions are in the object, the chain's
    /// genesis hash, how many are tracked, when the next tracking check and the storage alarm
    /// are due (ms from now), and the counters.
    pub fn view(&self, now_ms: u64) -> Value {
        let holder = self.holder.map(|holding| {
            let nonce = self.entries.get(&holding.entry).map(|e| e.nonce);
            let phase = match holding.phase {
                Phase::Checking(_) => "checking",
                Phase::Sending { .. } => "sending",
                Phase::Recovering(_) => "recovering",
            };
            json!({
                "session_key": holding.session_key.to_string(),
                "held_ms": now_ms.saturating_sub(holding.acquired_ms),
                "nonce": nonce,
                "expected_nonce": holding.expected,
                "phase": phase,
            })
        });
        let mut queued: Vec<u64> = self
            .entries
            .values()
            .filter(|e| e.stage == Stage::Waiting)
            .map(|e| e.nonce)
            .collect();
        queued.sort_unstable();
        let checking = self
            .entries
            .values()
            .filter(|e| matches!(e.stage, Stage::Checking(..)))
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
            "holder": holder,
            "queue_depth": queued.len(),
            "queued_nonces": queued,
            "checking": checking,
            "next_nonce": self.next,
            "mined_nonce": self.mined,
            "looking_up_nonce": self.nonces.running.is_some(),
            "in_flight": self.entries.len(),
            "accepted": accepted,
            "chain": self.chain.genesis,
            "upstream_pool": self.settings.pool.label(),
            "tracked": self.accepted.pending().len(),
            "next_check_ms": self.track_due_ms.map(|due| due.saturating_sub(now_ms)),
            "alarm_ms": (self.alarm_until_ms != 0)
                .then(|| self.alarm_until_ms.saturating_sub(now_ms)),
            "counters": self.counters,
        })
    }
}
