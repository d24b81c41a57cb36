//! Operator metrics: each is one structured JSON log line and, when an Analytics Engine dataset is
//! bound as `METRICS`, one data point with a fixed layout:
//!
//! | data point | content |
//! |---|---|
//! | index1 | the sender (lowercase 0x address), or `-` |
//! | blob1 | the event: `tx_forwarded`, `tx_retried`, `tx_deduplicated`, `tx_refused`, `force_release`, `fail_open`, `upstream_error`, `gap_wait_expired`, `nonce_lookup_failed`, `pending_nonce_raised` |
//! | blob2 | the label: the answer class, the reason or the upstream error kind |
//! | double1..3 | the event's values, in the order [`Metric::values`] lists them |
//!
//! Values per event: `tx_forwarded` lock_wait_ms, lock_hold_ms, queue_depth (transactions still
//! waiting at release); `tx_retried` attempt, delay_ms; `force_release` held_ms, queue_depth;
//! `gap_wait_expired` 1, waited_ms; `pending_nonce_raised` the upstream's count, the relay's;
//! the others 1 (a count). `docs/metrics.md` lists every field.

use serde_json::Value;

/// One metric event. See the module documentation for its data point layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// The event name (blob1; the log line's `event`).
    pub event: &'static str,
    /// The sender, lowercase 0x hex, or empty (index1).
    pub sender: String,
    /// The outcome or error kind (blob2; the log line's `label`).
    pub label: String,
    /// Up to three named values (double1..3; log line fields of the same names). Units: ms for
    /// `*_ms`, a count otherwise.
    pub values: Vec<(&'static str, f64)>,
    /// Extra fields for the log line only (tx hash, error text...).
    pub fields: Vec<(&'static str, Value)>,
}

impl Metric {
    /// A metric with no values or extra fields yet.
    pub fn new(event: &'static str, sender: impl Into<String>, label: impl Into<String>) -> Self {
        Metric {
            event,
            sender: sender.into(),
            label: label.into(),
            values: Vec::new(),
            fields: Vec::new(),
        }
    }

    /// Adds a named value (at most three are written as doubles).
    pub fn value(mut self, name: &'static str, value: f64) -> Self {
        self.values.push((name, value));
        self
    }

    /// Adds a log-only field.
    pub fn field(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push((name, value.into()));
        self
    }

    /// The JSON log line: `{"event", "sender", "label", values..., fields...}`.
    pub fn log_line(&self) -> String {
        let mut all: Vec<(&str, Value)> = vec![
            ("sender", self.sender.clone().into()),
            ("label", self.label.clone().into()),
        ];
        for (name, v) in &self.values {
            all.push((
                name,
                serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number),
            ));
        }
        all.extend(self.fields.iter().cloned());
        crate::log::line(self.event, &all)
    }

    /// The doubles of the data point: the first three values, zero-padded.
    pub fn doubles(&self) -> [f64; 3] {
        let mut out = [0.0; 3];
        for (slot, (_, v)) in out.iter_mut().zip(&self.values) {
            *slot = *v;
        }
        out
    }

    /// The index of the data point: the sender, or `-` when there is none.
    pub fn index(&self) -> &str {
        if self.sender.is_empty() {
            "-"
        } else {
            &self.sender
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn log_line_and_data_point_agree() {
        let m = Metric::new("tx_forwarded", "0xab", "accepted")
            .value("lock_wait_ms", 12.0)
            .value("lock_hold_ms", 3.5)
            .field("nonce", 7);
        let v: Value = serde_json::from_str(&m.log_line()).unwrap();
        assert_eq!(
            v,
            json!({"event": "tx_forwarded", "sender": "0xab", "label": "accepted",
                   "lock_wait_ms": 12.0, "lock_hold_ms": 3.5, "nonce": 7})
        );
        assert_eq!(m.doubles(), [12.0, 3.5, 0.0]);
        assert_eq!(m.index(), "0xab");
        assert_eq!(Metric::new("upstream_error", "", "timeout").index(), "-");
    }
}
