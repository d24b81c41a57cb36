//! What the relay knows of each upstream's `eth_getLogs` limits ([`LogLimits`]): the block range
//! cap of one query, learned from each refusal of a range (its words, [`super::refusal`]:
//! [`taught`]), beside the cap the operator set for it (`GETLOGS_UPSTREAM_RANGE`). Kept by URL, as
//! [`crate::upstream::batch::BatchLimits`] keeps each upstream's batch limit, per chain by the
//! isolate. The pieces' size comes from the smallest cap among the upstreams that may answer
//! ([`LogLimits::range_cap`]): any of them may be given a piece. Pure.

use super::refusal::Said;
use std::collections::HashMap;

/// Each upstream's learned range cap, blocks per query, by its URL.
#[derive(Debug, Clone, Default)]
pub struct LogLimits {
    range: HashMap<String, u64>,
}

/// The range cap, blocks, a refusal `said` teaches of the upstream that refused a query of
/// `asked` (its first and last block, when the query named them as numbers): the cap it names,
/// else the length of the range it suggests, else one block less than it refused; and never more
/// than one block less than it refused, whatever its words counted (a provider counting its cap
/// otherwise still gets smaller queries). At least 1. `None` for a refusal of something else (a
/// result, filter or rate cap) or a range cap neither named nor learnable from the query.
pub fn taught(said: Said, asked: Option<(u64, u64)>) -> Option<u64> {
    let Said::RangeCap { blocks, suggested } = said else {
        return None;
    };
    let length = |(from, to): (u64, u64)| to.saturating_sub(from).saturating_add(1);
    let below = asked.map(|a| length(a).saturating_sub(1));
    let named = blocks.or(suggested.map(length));
    let cap = match (named, below) {
        (Some(n), Some(b)) => n.min(b),
        (n, b) => n.or(b)?,
    };
    Some(cap.max(1))
}

/// `GETLOGS_UPSTREAM_RANGE`: the range cap, blocks per query, the operator knows of each
/// upstream: one for all (`1000`), or one per `UPSTREAM_RPC_URL` in its order (`1000,,10000`; an
/// empty entry: learned). Empty: every cap learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamRanges(Vec<Option<u64>>);

impl UpstreamRanges {
    /// Reads the setting's value.
    ///
    /// # Errors
    /// The problem, for an entry that is not a whole number of 1 or more, or a list of nothing.
    pub fn parse(value: &str) -> Result<UpstreamRanges, String> {
        let entries = value
            .split(',')
            .map(|entry| match entry.trim() {
                "" => Ok(None),
                n => match n.parse::<u64>() {
                    Ok(0) => Err("an entry must be 1 or more (empty: learned)".to_string()),
                    Ok(n) => Ok(Some(n)),
                    Err(_) => Err(format!("an entry must be a whole number, got {n:?}")),
                },
            })
            .collect::<Result<Vec<_>, _>>()?;
        if entries.iter().all(Option::is_none) {
            return Err("names no cap (unset it: learned)".into());
        }
        Ok(UpstreamRanges(entries))
    }

    /// Whether it fits a chain of `upstreams` upstreams: one entry for all, or one each.
    pub fn fits(&self, upstreams: usize) -> bool {
        self.0.len() <= 1 || self.0.len() == upstreams
    }

    /// The cap set for the upstream at `index` in `UPSTREAM_RPC_URL`; `None`: learned.
    pub fn of(&self, index: usize) -> Option<u64> {
        match self.0.as_slice() {
            [all] => *all,
            each => each.get(index).copied().flatten(),
        }
    }
}

impl LogLimits {
    /// Learns that upstream `key` takes at most `blocks` blocks per query (at least 1). Returns
    /// whether its known cap went down (to be logged).
    pub fn learn_range(&mut self, key: &str, blocks: u64) -> bool {
        let blocks = blocks.max(1);
        match self.range.get_mut(key) {
            Some(cap) if *cap <= blocks => false,
            Some(cap) => {
                *cap = blocks;
                true
            }
            None => {
                self.range.insert(key.to_string(), blocks);
                true
            }
        }
    }

    /// The range cap of the pieces asked of `set` (upstream URLs, each with the cap the operator
    /// set for it, `GETLOGS_UPSTREAM_RANGE`): the smallest cap learned or set among them; `None`
    /// while none is known.
    pub fn range_cap<'a>(
        &self,
        set: impl IntoIterator<Item = (&'a str, Option<u64>)>,
    ) -> Option<u64> {
        set.into_iter()
            .filter_map(
                |(key, configured)| match (self.range.get(key), configured) {
                    (Some(&a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.copied().or(b),
                },
            )
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_upstreams_cap_is_its_own_and_the_smallest_sizes_the_pieces() {
        let mut limits = LogLimits::default();
        let set = |a: Option<u64>, b: Option<u64>| [("https://a", a), ("https://b", b)];
        assert_eq!(limits.range_cap(set(None, None)), None);
        assert_eq!(limits.range_cap(set(None, Some(5_000))), Some(5_000));
        assert!(limits.learn_range("https://a", 10_000));
        assert!(
            !limits.learn_range("https://a", 20_000),
            "a larger cap does not raise it"
        );
        assert_eq!(limits.range_cap(set(None, None)), Some(10_000));
        assert_eq!(limits.range_cap(set(None, Some(5_000))), Some(5_000));
        assert_eq!(
            limits.range_cap([("https://b", None)]),
            None,
            "another upstream's cap is its own"
        );
        assert!(limits.learn_range("https://b", 100));
        assert_eq!(limits.range_cap(set(None, None)), Some(100));
        assert_eq!(limits.range_cap([("https://a", None)]), Some(10_000));
        assert!(limits.learn_range("https://a", 0));
        assert_eq!(limits.range_cap([("https://a", None)]), Some(1));
    }

    #[test]
    fn the_operators_caps_are_one_for_all_or_one_each() {
        let all = UpstreamRanges::parse("1000").unwrap();
        assert_eq!((all.of(0), all.of(3)), (Some(1_000), Some(1_000)));
        assert!(all.fits(1) && all.fits(3));
        let each = UpstreamRanges::parse("1000, ,10000").unwrap();
        assert_eq!(
            (each.of(0), each.of(1), each.of(2)),
            (Some(1_000), None, Some(10_000))
        );
        assert!(each.fits(3) && !each.fits(2));
        assert_eq!(UpstreamRanges::default().of(0), None);
        for bad in ["0", "1000,x", ",", "-5"] {
            assert!(UpstreamRanges::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_refusal_teaches_the_cap_it_names_never_above_what_it_refused() {
        let range = |blocks, suggested| Said::RangeCap { blocks, suggested };
        // geth's "exceed maximum block range 1000" of 1,001 blocks.
        assert_eq!(
            taught(range(Some(1_000), None), Some((0, 1_000))),
            Some(1_000)
        );
        // A provider counting otherwise: "max 1000" of 1,000 blocks.
        assert_eq!(
            taught(range(Some(1_000), None), Some((1, 1_000))),
            Some(999)
        );
        // The first ask named `latest`: the words alone.
        assert_eq!(taught(range(Some(10_000), None), None), Some(10_000));
        // Alchemy's hint of the first 10 blocks.
        assert_eq!(
            taught(range(None, Some((16, 25))), Some((16, 2_000))),
            Some(10)
        );
        // Besu names nothing: one block less than it refused.
        assert_eq!(taught(range(None, None), Some((0, 511))), Some(511));
        assert_eq!(taught(range(None, None), None), None);
        assert_eq!(taught(range(Some(0), None), Some((5, 5))), Some(1));
        assert_eq!(
            taught(Said::ResultCap { suggested: None }, Some((0, 9))),
            None
        );
        assert_eq!(taught(Said::RateLimited, Some((0, 9))), None);
        assert_eq!(taught(Said::FilterCap, Some((0, 9))), None);
    }
}
