//! What a sender's Durable Object costs on Cloudflare's bill, as the object counts it
//! ([`ObjectBill`]): the time it could not hibernate, its requests, its alarms.
//!
//! The rule (Durable Objects docs, "Pricing", last updated 2026-06-19): an object is "billed for
//! compute duration (wall-clock time) while the Durable Object is actively running or is idle in
//! memory but unable to hibernate", and "Durable Objects that are idle and eligible for
//! hibernation are not billed for duration, even before the runtime has hibernated them". It may
//! hibernate only when no `setTimeout` is pending, no I/O is unfinished and no request or event is
//! being processed ("Lifecycle of a Durable Object"). So the object counts a *hold* for each of
//! those while it lasts: a request or an alarm being served, its one timer armed, each task with
//! I/O under way (a send, a lookup, a publish, a cancel, a storage call); the billable time is
//! the time at least one hold was open. Requests ($0.15 per million, alarm invocations included)
//! and `setAlarm` calls ("Each `setAlarm()` is billed as a single row written") are counted
//! beside it; rows written by SQL are the store's ([`crate::ordering::store::Store::rows_written`]).
//! BENCHMARKS.md, "A lone transaction's bill", prices it.

use serde_json::{json, Value};

/// One object instance's bill since it started. See the module documentation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectBill {
    /// Holds open now.
    open: u32,
    /// When the first of the open holds began, Unix ms.
    since_ms: u64,
    /// Billable time of the spans already closed, ms.
    closed_ms: u64,
    /// Spans (from no hold to no hold again): how many times the object could not hibernate.
    spans: u64,
    /// Requests served (the Worker's calls; the per-sender view is not counted).
    pub requests: u64,
    /// Storage alarms that fired (each a billed request).
    pub alarms_fired: u64,
    /// `setAlarm` calls (each billed as a row written).
    pub alarms_set: u64,
    /// `deleteAlarm` calls.
    pub alarms_deleted: u64,
    /// `deleteAll` calls (the storage deleted once nothing is left).
    pub storage_deleted: u64,
}

impl ObjectBill {
    /// A hold begins at `now_ms` (Unix ms).
    pub fn hold(&mut self, now_ms: u64) {
        if self.open == 0 {
            self.since_ms = now_ms;
            self.spans += 1;
        }
        self.open += 1;
    }

    /// A hold ends at `now_ms` (Unix ms); one more release than holds is ignored.
    pub fn release(&mut self, now_ms: u64) {
        match self.open {
            0 => {}
            1 => {
                self.open = 0;
                self.closed_ms += now_ms.saturating_sub(self.since_ms);
            }
            _ => self.open -= 1,
        }
    }

    /// Whether a hold is open: the object cannot hibernate now.
    pub fn held(&self) -> bool {
        self.open > 0
    }

    /// The billable time up to `now_ms` (Unix ms), ms: every closed span, and the open one so far.
    pub fn billable_ms(&self, now_ms: u64) -> u64 {
        let open = match self.open {
            0 => 0,
            _ => now_ms.saturating_sub(self.since_ms),
        };
        self.closed_ms + open
    }

    /// The bill as the per-sender view shows it (`bill`), with the store's `rows_written`:
    /// `billable_ms`, `spans`, `held_now`, `requests`, `alarms_fired`, `alarms_set`,
    /// `alarms_deleted`, `storage_deleted`, `rows_written`.
    pub fn view(&self, now_ms: u64, rows_written: u64) -> Value {
        json!({
            "billable_ms": self.billable_ms(now_ms),
            "spans": self.spans,
            "held_now": self.open,
            "requests": self.requests,
            "alarms_fired": self.alarms_fired,
            "alarms_set": self.alarms_set,
            "alarms_deleted": self.alarms_deleted,
            "storage_deleted": self.storage_deleted,
            "rows_written": rows_written,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_holds_bill_their_union_and_a_gap_bills_nothing() {
        let mut bill = ObjectBill::default();
        bill.hold(1_000); // a request
        bill.hold(1_010); // its send
        bill.release(1_060); // the send answered
        bill.release(1_065); // the request answered
        assert!(!bill.held());
        bill.hold(13_000); // the alarm, 12 s later: hibernation-eligible meanwhile
        assert_eq!(bill.billable_ms(13_040), 65 + 40, "the open span so far");
        bill.release(13_080);
        bill.release(20_000); // one too many: ignored
        assert_eq!(bill.billable_ms(30_000), 65 + 80);
        assert_eq!(bill.view(30_000, 3)["spans"], 2);
    }
}
