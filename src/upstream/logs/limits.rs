//! What the relay knows of its upstreams' `eth_getLogs` limits ([`LogLimits`]): the block range
//! cap of one query, learned from each refusal that names one (or from a piece refused for its
//! range), beside the cap the operator set (`GETLOGS_UPSTREAM_RANGE`). The pieces' size comes from
//! the smallest, since any upstream of the chain may answer a piece. Kept per chain by the
//! isolate; pure.

use std::collections::HashMap;

/// The learned range caps, blocks per query, by chain ([`crate::config::Config::chain_key`]).
#[derive(Debug, Clone, Default)]
pub struct LogLimits {
    range: HashMap<u64, u64>,
}

impl LogLimits {
    /// Learns that an upstream of `chain` takes at most `blocks` blocks per query (at least 1).
    /// Returns whether the known cap went down (to be logged).
    pub fn learn_range(&mut self, chain: u64, blocks: u64) -> bool {
        let blocks = blocks.max(1);
        let cap = self.range.entry(chain).or_insert(u64::MAX);
        let lower = blocks < *cap;
        *cap = (*cap).min(blocks);
        lower
    }

    /// The range cap of `chain`'s pieces: the smallest of the one learned and `configured`
    /// (`GETLOGS_UPSTREAM_RANGE`); `None` while neither is known.
    pub fn range_cap(&self, chain: u64, configured: Option<u64>) -> Option<u64> {
        match (self.range.get(&chain).copied(), configured) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_smallest_cap_learned_or_set_is_the_chains() {
        let mut limits = LogLimits::default();
        assert_eq!(limits.range_cap(1, None), None);
        assert_eq!(limits.range_cap(1, Some(5_000)), Some(5_000));
        assert!(limits.learn_range(1, 10_000));
        assert!(
            !limits.learn_range(1, 20_000),
            "a larger cap does not raise it"
        );
        assert_eq!(limits.range_cap(1, None), Some(10_000));
        assert_eq!(limits.range_cap(1, Some(5_000)), Some(5_000));
        assert_eq!(
            limits.range_cap(2, None),
            None,
            "another chain's upstreams are its own"
        );
        assert!(limits.learn_range(1, 0));
        assert_eq!(limits.range_cap(1, None), Some(1));
    }
}
