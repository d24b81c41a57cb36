//! A key's daily and monthly budgets, counted by the key's Durable Object alone ([`Budget`]),
//! which hands isolates leases of units ([`Lease`]): an isolate spends its lease's units (one per
//! request member) without asking, and asks for the next lease when they are spent or the lease
//! is [`LEASE_MS`] old. Units are counted as used when granted, so the budget is never overspent,
//! whatever the isolates do; what a lost isolate held (at most [`LEASE_MAX_UNITS`] per lease out)
//! is lost until the next reset, and what a live one did not spend it gives back with its next
//! ask. The lease's life is also how long a revoked key may still be served by an isolate that
//! holds one. Pure and clock-free.

use serde::{Deserialize, Serialize};

/// A lease's life, ms: an isolate asks again after it, so a key revoked (or a budget changed)
/// stops within it.
pub const LEASE_MS: u64 = 10_000;

/// The most units one lease holds.
pub const LEASE_MAX_UNITS: u64 = 100;

/// A day, ms.
const DAY_MS: u64 = 86_400_000;

/// A key's quota: units (request members) per UTC day and per UTC month; `None` is unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Quota {
    /// Units per UTC day.
    pub per_day: Option<u64>,
    /// Units per UTC calendar month.
    pub per_month: Option<u64>,
}

/// The UTC calendar month of the day `days` since 1970-01-01, as `year * 12 + month - 1`
/// (Howard Hinnant's civil_from_days).
fn month_of_day(days: u64) -> u64 {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year * 12 + month - 1) as u64
}

/// The first day (since 1970-01-01) of the month `month_of_day` names (Hinnant's
/// days_from_civil, day 1).
fn first_day_of_month(month: u64) -> u64 {
    let (year, m) = ((month / 12) as i64, (month % 12 + 1) as i64);
    let y = if m <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) as u64
}

/// What the key's object counts: the units used this UTC day and month.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// The UTC day counted (days since 1970-01-01).
    pub day: u64,
    /// Units used (granted, less those given back) that day.
    pub used_day: u64,
    /// The UTC month counted (`year * 12 + month - 1`).
    pub month: u64,
    /// Units used that month.
    pub used_month: u64,
}

/// A grant of units to one isolate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Units it may spend (0: over budget).
    pub units: u64,
    /// When it ends, ms since the epoch.
    pub expires_ms: u64,
    /// When it was granted, ms: units given back count only in the same day and month.
    pub granted_ms: u64,
    /// Over budget: when the budget that is spent starts again, ms since the epoch.
    pub reset_ms: Option<u64>,
}

impl Budget {
    /// Starts the day's and the month's count again when `now_ms` is in a new one.
    fn roll(&mut self, now_ms: u64) {
        let day = now_ms / DAY_MS;
        if day != self.day {
            self.day = day;
            self.used_day = 0;
        }
        let month = month_of_day(day);
        if month != self.month {
            self.month = month;
            self.used_month = 0;
        }
    }

    /// A lease of at most `want` units (at least 1, at most [`LEASE_MAX_UNITS`]) under `quota`
    /// at `now_ms`, after taking back `returned` units of a lease granted at `returned_from_ms`
    /// (only within the same day and month; never more than was used). Units left are shared:
    /// a lease takes at most a quarter of what is left (at least 1), so that one isolate does
    /// not hold what others need. None left: a lease of 0 units with the reset time.
    pub fn grant(
        &mut self,
        quota: &Quota,
        want: u64,
        returned: u64,
        returned_from_ms: u64,
        now_ms: u64,
    ) -> Lease {
        self.roll(now_ms);
        if returned_from_ms / DAY_MS == self.day {
            self.used_day = self.used_day.saturating_sub(returned);
        }
        if month_of_day(returned_from_ms / DAY_MS) == self.month {
            self.used_month = self.used_month.saturating_sub(returned);
        }
        let left_day = quota.per_day.map(|q| q.saturating_sub(self.used_day));
        let left_month = quota.per_month.map(|q| q.saturating_sub(self.used_month));
        let left = left_day.into_iter().chain(left_month).min();
        let want = want.clamp(1, LEASE_MAX_UNITS);
        let units = match left {
            None => want,
            Some(left) => want.min((left / 4).max(1)).min(left),
        };
        self.used_day += units;
        self.used_month += units;
        let reset_ms = (units == 0).then(|| self.reset_ms(quota, left_day, left_month));
        Lease {
            units,
            expires_ms: now_ms + LEASE_MS,
            granted_ms: now_ms,
            reset_ms,
        }
    }

    /// When the spent budget starts again: the next UTC midnight when the day's is spent, else
    /// the first of the next month.
    fn reset_ms(&self, quota: &Quota, left_day: Option<u64>, left_month: Option<u64>) -> u64 {
        let next_day = (self.day + 1) * DAY_MS;
        let next_month = first_day_of_month(self.month + 1) * DAY_MS;
        match (left_day, left_month) {
            (_, Some(0)) if quota.per_month.is_some() => next_month,
            _ => next_day,
        }
    }
}

/// An isolate's lease for one key, as it spends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// The lease.
    pub lease: Lease,
    /// Units spent of it.
    pub spent: u64,
}

impl Held {
    /// Spends one unit at `now_ms`: `false` when none is left or the lease has ended (ask the
    /// key's object for the next).
    pub fn spend(&mut self, now_ms: u64) -> bool {
        if now_ms >= self.lease.expires_ms || self.spent >= self.lease.units {
            return false;
        }
        self.spent += 1;
        true
    }

    /// Units not spent, given back with the next ask.
    pub fn unspent(&self) -> u64 {
        self.lease.units - self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-28T12:00:00Z, ms.
    const NOON: u64 = 1_795_867_200_000;

    #[test]
    fn the_calendar_is_utcs() {
        let day = NOON / DAY_MS;
        assert_eq!(month_of_day(day), 2026 * 12 + 10, "November 2026");
        assert_eq!(
            first_day_of_month(2026 * 12 + 11) * DAY_MS,
            1_796_083_200_000,
            "2026-12-01"
        );
        assert_eq!(
            first_day_of_month(2027 * 12) * DAY_MS,
            1_798_761_600_000,
            "2027-01-01"
        );
        assert_eq!(month_of_day(0), 1970 * 12);
        assert_eq!(month_of_day(59), 1970 * 12 + 2, "1970-03-01");
    }

    #[test]
    fn a_lease_takes_a_share_of_what_is_left_and_none_past_the_budget() {
        let quota = Quota {
            per_day: Some(10),
            per_month: None,
        };
        let mut b = Budget::default();
        let first = b.grant(&quota, 100, 0, 0, NOON);
        assert_eq!((first.units, first.expires_ms), (2, NOON + LEASE_MS));
        let mut total = first.units;
        for _ in 0..20 {
            total += b.grant(&quota, 100, 0, 0, NOON).units;
        }
        assert_eq!(total, 10, "never more than the day's budget");
        let over = b.grant(&quota, 1, 0, 0, NOON);
        assert_eq!(over.units, 0);
        assert_eq!(
            over.reset_ms,
            Some((NOON / DAY_MS + 1) * DAY_MS),
            "the next UTC midnight"
        );
        // Given back the same day: granted again.
        assert_eq!(b.grant(&quota, 1, 1, NOON, NOON + 1).units, 1);
        // The next day: a new budget.
        assert_eq!(b.grant(&quota, 100, 0, 0, NOON + DAY_MS).units, 2);
    }

    #[test]
    fn the_month_is_counted_too_and_says_its_own_reset() {
        let quota = Quota {
            per_day: Some(100),
            per_month: Some(3),
        };
        let mut b = Budget::default();
        let granted: u64 = (0..5).map(|_| b.grant(&quota, 1, 0, 0, NOON).units).sum();
        assert_eq!(granted, 3);
        let over = b.grant(&quota, 1, 0, 0, NOON);
        assert_eq!(over.reset_ms, Some(1_796_083_200_000), "2026-12-01");
        assert_eq!(
            b.grant(&quota, 1, 0, 0, NOON + DAY_MS).units,
            0,
            "the month is still spent"
        );
    }

    /// N isolates spend one daily budget with leases; some die holding theirs (lost), the live
    /// ones give back what they did not spend. The budget is never overspent, and what was not
    /// served is at most what the lost leases held.
    #[test]
    fn isolates_spending_one_budget_with_leases_never_overspend_it() {
        let budget = 1_000;
        let quota = Quota {
            per_day: Some(budget),
            per_month: None,
        };
        for isolates in [1usize, 3, 8, 20] {
            let mut object = Budget::default();
            let mut held: Vec<Option<Held>> = vec![None; isolates];
            let (mut served, mut refused, mut lost) = (0u64, 0u64, 0u64);
            let mut now = NOON;
            // A pseudo-random walk: which isolate gets the next request, which dies.
            let mut seed = 0x2545_f491_4f6c_dd1du64 ^ isolates as u64;
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            for _ in 0..5_000 {
                now += next() % 50;
                let i = (next() % isolates as u64) as usize;
                if next() % 97 == 0 {
                    // The isolate dies (a deploy, eviction): its lease is lost.
                    lost += held[i].take().map_or(0, |h| h.unspent());
                    continue;
                }
                let spent = held[i].as_mut().is_some_and(|h| h.spend(now));
                let ok = match spent {
                    true => true,
                    false => {
                        let (back, from) =
                            held[i].map_or((0, 0), |h| (h.unspent(), h.lease.granted_ms));
                        let lease = object.grant(&quota, 20, back, from, now);
                        if lease.units == 0 {
                            // Refused only when every unit is served, lost or held elsewhere.
                            assert_eq!(object.used_day, budget);
                        }
                        let mut h = Held { lease, spent: 0 };
                        let ok = h.spend(now);
                        held[i] = Some(h);
                        ok
                    }
                };
                if ok {
                    served += 1
                } else {
                    refused += 1
                }
            }
            let out: u64 = held.iter().flatten().map(Held::unspent).sum();
            assert!(
                served <= budget,
                "{isolates} isolates served {served} of {budget}"
            );
            assert!(refused > 0, "the budget was spent");
            assert_eq!(object.used_day, served + lost + out);
            println!("{isolates} isolates: served {served}, lost with dead isolates {lost}, held {out}, refused {refused}");
        }
    }
}
