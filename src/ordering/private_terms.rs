//! What a client asked of the private route for one transaction ([`PrivateTerms`]): whether, and
//! after how many blocks, the relay may send it to the public mempool when the route has not had
//! it included (the client's opt-in, `?public_after_blocks=N` on the URL it sends to, as Flashbots
//! Protect's `useMempool`, capped by the operator's `SEND_PUBLIC_AFTER_BLOCKS`), and the last block
//! it may be included in (`eth_sendPrivateTransaction`'s `maxBlockNumber`). They travel with the
//! transaction ([`crate::ordering::tx::SignedTx`]) and are kept in its row, so a restart keeps
//! them; without an opt-in a transaction is never published.

use std::fmt;

/// The query parameter of the opt-in: `/?public_after_blocks=N`, N at least 1.
pub const PUBLIC_AFTER_QUERY: &str = "public_after_blocks";

/// The response header that tells a client whether its private send may go public: `never`, or
/// the number of blocks after which it may ([`header_value`]). Set on every answer to a body with
/// a send behind a private route.
pub const PUBLIC_AFTER_HEADER: &str = "x-public-after-blocks";

/// What the sender asked of the private route for one transaction. See the module documentation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrivateTerms {
    /// Blocks after the first tracking check that found it pending, without inclusion, after
    /// which it may go to the public mempool ([`granted`]); `None`: never.
    pub public_after_blocks: Option<u64>,
    /// The highest block it may be included in (`eth_sendPrivateTransaction`'s
    /// `maxBlockNumber`); past it the transaction is final: not sent again, not counted, not
    /// published. `None`: no bound.
    pub max_block_number: Option<u64>,
}

impl PrivateTerms {
    /// The terms of a transaction sent with `method` and the opt-in `public_after_blocks`.
    pub fn of(
        method: &crate::ordering::send_method::SendMethod,
        public_after_blocks: Option<u64>,
    ) -> Self {
        PrivateTerms {
            public_after_blocks,
            max_block_number: method.max_block_number(),
        }
    }

    /// After how many blocks it may go to the public mempool now that the operator allows
    /// `allowed` (`SEND_PUBLIC_AFTER_BLOCKS`): its opt-in, at most `allowed` ([`granted`]); never
    /// one bounded by a `maxBlockNumber`, which the public mempool would not keep.
    pub fn public_after(&self, allowed: Option<u64>) -> Option<u64> {
        granted(self.public_after_blocks, allowed).filter(|_| self.max_block_number.is_none())
    }

    /// Whether following it needs the chain's head (to count blocks, or to see its
    /// `maxBlockNumber` pass).
    pub fn needs_head(&self) -> bool {
        self.public_after_blocks.is_some() || self.max_block_number.is_some()
    }

    /// Whether it can no longer be included once the chain's head is `head`: a block past its
    /// `maxBlockNumber` exists.
    pub fn lapsed(&self, head: u64) -> bool {
        self.max_block_number.is_some_and(|max| head > max)
    }
}

/// Why an opt-in in a query string is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadOptIn(pub String);

impl fmt::Display for BadOptIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {PUBLIC_AFTER_QUERY}: {:.40} (a number of blocks, at least 1)",
            self.0
        )
    }
}

/// The client's opt-in in the query string of the URL it sent to (`public_after_blocks=N`):
/// `None` without one.
///
/// # Errors
/// [`BadOptIn`] when the value is not a whole number of blocks, at least 1 (decimal).
pub fn opt_in_of_query(query: Option<&str>) -> Result<Option<u64>, BadOptIn> {
    let Some(value) = query.and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix(PUBLIC_AFTER_QUERY)?.strip_prefix('='))
    }) else {
        return Ok(None);
    };
    match value.parse::<u64>() {
        Ok(blocks) if blocks >= 1 => Ok(Some(blocks)),
        _ => Err(BadOptIn(value.to_string())),
    }
}

/// The opt-in the relay honours: the client's `asked` blocks, at most the operator's `allowed`
/// (`SEND_PUBLIC_AFTER_BLOCKS`, the longest a transaction is kept private before it may go
/// public); `None` (never published) when the client did not opt in or the operator allows no
/// publishing.
pub fn granted(asked: Option<u64>, allowed: Option<u64>) -> Option<u64> {
    Some(asked?.min(allowed?))
}

/// The value of [`PUBLIC_AFTER_HEADER`] for a [`granted`] opt-in: `never`, or the number of blocks.
pub fn header_value(granted: Option<u64>) -> String {
    granted.map_or_else(|| "never".to_string(), |blocks| blocks.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opt_in_is_the_clients_and_the_operator_caps_it() {
        assert_eq!(opt_in_of_query(None), Ok(None));
        assert_eq!(opt_in_of_query(Some("sender=0x1")), Ok(None));
        assert_eq!(
            opt_in_of_query(Some("a=1&public_after_blocks=3")),
            Ok(Some(3))
        );
        for bad in [
            "public_after_blocks=0",
            "public_after_blocks=",
            "public_after_blocks=-1",
            "public_after_blocks=0x3",
        ] {
            assert!(opt_in_of_query(Some(bad)).is_err(), "{bad}");
        }
        // Another parameter that starts with the name is not the opt-in.
        assert_eq!(opt_in_of_query(Some("public_after_blocks_x=3")), Ok(None));
        assert_eq!(granted(Some(3), Some(25)), Some(3));
        assert_eq!(granted(Some(30), Some(25)), Some(25));
        assert_eq!(granted(None, Some(25)), None);
        assert_eq!(granted(Some(3), None), None);
        assert_eq!(header_value(None), "never");
        assert_eq!(header_value(Some(3)), "3");
        let terms = PrivateTerms {
            public_after_blocks: None,
            max_block_number: Some(10),
        };
        assert!(terms.needs_head());
        assert!(!terms.lapsed(10));
        assert!(terms.lapsed(11));
        assert!(!PrivateTerms::default().needs_head());
        assert!(!PrivateTerms::default().lapsed(u64::MAX));
    }
}
