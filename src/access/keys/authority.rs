//! The key's Durable Object's whole face ([`Authority`]): the authority for one key's record
//! (revoked or not, its scope, its quota) and the one counter of its budgets. Isolates ask it for
//! a lease ([`LeaseAsk`] → [`LeaseAnswer`]) when theirs is spent or [`super::budget::LEASE_MS`]
//! old; the admin API sets its record ([`Authority::set_record`]) beside the KV entry, so a
//! revocation reaches it at once, while KV, seen elsewhere a minute or more later, only says
//! that a key exists. Pure and clock-free.

use super::budget::{Budget, Lease};
use super::KeyRecord;
use serde::{Deserialize, Serialize};

/// An isolate's ask for a lease of one key's units.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LeaseAsk {
    /// Units wanted (1 to [`super::budget::LEASE_MAX_UNITS`]).
    pub want: u64,
    /// Units of its last lease not spent, given back.
    pub returned: u64,
    /// When that lease was granted, ms.
    pub returned_from_ms: u64,
    /// Sends and reads made since its last ask, for the key's usage.
    pub sends: u64,
    /// See `sends`.
    pub reads: u64,
    /// The record as the isolate read it from KV: taken only when the object has none (the
    /// admin API sets it first, so this is for a key made before its object knew it).
    pub record: Option<KeyRecord>,
}

/// The object's answer to a [`LeaseAsk`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LeaseAnswer {
    /// Units to spend under this record (0 units: over budget, `lease.reset_ms` says when).
    Granted {
        /// The record (scope, quota) the isolate applies until the lease ends.
        record: Box<KeyRecord>,
        /// The units.
        lease: Lease,
    },
    /// Revoked: refused (HTTP 401).
    Revoked,
    /// No such key: refused (HTTP 401).
    Unknown,
}

/// One key's usage as its object counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Sends made (reported with each lease ask), since the key was made.
    pub sends: u64,
    /// Reads made (every member that is not a send), since the key was made.
    pub reads: u64,
}

/// The key's object's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Authority {
    /// The key's record; `None` until the admin API (or an isolate's KV copy) gave it.
    pub record: Option<KeyRecord>,
    /// Its budgets' counts.
    pub budget: Budget,
    /// Its usage.
    pub usage: Usage,
}

impl Authority {
    /// Answers `ask` at `now_ms`: a lease under the record known (the ask's KV copy when the
    /// object has none), [`LeaseAnswer::Revoked`] or [`LeaseAnswer::Unknown`].
    pub fn lease(&mut self, ask: LeaseAsk, now_ms: u64) -> LeaseAnswer {
        if self.record.is_none() {
            self.record = ask.record;
        }
        self.usage.sends += ask.sends;
        self.usage.reads += ask.reads;
        let Some(record) = &self.record else {
            return LeaseAnswer::Unknown;
        };
        if record.revoked {
            return LeaseAnswer::Revoked;
        }
        let lease = self.budget.grant(
            &record.quota,
            ask.want,
            ask.returned,
            ask.returned_from_ms,
            now_ms,
        );
        LeaseAnswer::Granted {
            record: Box::new(record.clone()),
            lease,
        }
    }

    /// The admin API's record: from now on the only one (a revoked one stays revoked).
    pub fn set_record(&mut self, record: KeyRecord) {
        let revoked = self.record.as_ref().is_some_and(|r| r.revoked);
        self.record = Some(KeyRecord {
            revoked: record.revoked || revoked,
            ..record
        });
    }
}

#[cfg(test)]
mod tests {
    use super::super::budget::Quota;
    use super::*;

    fn record() -> KeyRecord {
        KeyRecord {
            id: "k_0123456789abcdef".into(),
            quota: Quota {
                per_day: Some(1_000),
                per_month: None,
            },
            ..KeyRecord::default()
        }
    }

    #[test]
    fn the_objects_record_wins_over_a_kv_copy_and_revoking_is_for_good() {
        let mut a = Authority::default();
        let ask = |record: Option<KeyRecord>| LeaseAsk {
            want: 10,
            record,
            ..LeaseAsk::default()
        };
        assert_eq!(a.lease(ask(None), 0), LeaseAnswer::Unknown);
        assert!(matches!(
            a.lease(ask(Some(record())), 0),
            LeaseAnswer::Granted { .. }
        ));
        a.set_record(KeyRecord {
            revoked: true,
            ..record()
        });
        // KV still serves the old record: the object's says revoked.
        assert_eq!(a.lease(ask(Some(record())), 1), LeaseAnswer::Revoked);
        a.set_record(record());
        assert_eq!(a.lease(ask(None), 2), LeaseAnswer::Revoked, "not restored");
    }

    #[test]
    fn usage_is_summed_from_the_asks() {
        let mut a = Authority::default();
        a.set_record(record());
        for _ in 0..3 {
            a.lease(
                LeaseAsk {
                    want: 1,
                    sends: 2,
                    reads: 5,
                    ..LeaseAsk::default()
                },
                0,
            );
        }
        assert_eq!(
            a.usage,
            Usage {
                sends: 6,
                reads: 15
            }
        );
    }
}
