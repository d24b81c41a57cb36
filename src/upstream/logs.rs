//! `eth_getLogs` over any range, behind any provider (docs/getlogs.md): what a refusal says of a
//! provider's limits ([`refusal`]), the limits learned ([`limits`]), a range cut into aligned
//! power-of-two pieces ([`pieces`]), and the pieces' answers merged into one ([`merge`]). Pure;
//! the relay asks the pieces (`src/relay/logs.rs`), each through the read cache as any read.
//!
//! A range within the known cap goes as asked; so does any range while no cap is known (a
//! deployment whose upstream takes any range sees no change). A refusal that names a range or
//! result cap makes the range go again as pieces; one that names a filter cap or a rate limit is
//! the client's answer. At most [`MAX_IN_FLIGHT`] pieces of one request are asked at once.

pub mod limits;
pub mod merge;
pub mod pieces;
pub mod refusal;

use serde_json::Value;

/// The most pieces of one client request in flight at once (its batch's members counted
/// together by the relay), within the six connections a Worker may wait on.
pub const MAX_IN_FLIGHT: usize = 4;

/// A block of an `eth_getLogs` filter's range, as the filter names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A block number.
    Number(u64),
    /// `latest` (or left out): the head.
    Latest,
    /// `earliest`: block 0.
    Earliest,
    /// Any other tag (`safe`, `finalized`, `pending`): the range goes as asked.
    Other,
}

impl Bound {
    fn of(v: Option<&Value>) -> Option<Bound> {
        match v {
            None | Some(Value::Null) => Some(Bound::Latest),
            Some(Value::String(s)) => Some(match s.as_str() {
                "latest" => Bound::Latest,
                "earliest" => Bound::Earliest,
                "safe" | "finalized" | "pending" => Bound::Other,
                n => Bound::Number(crate::hex::decode_quantity(n).ok()?),
            }),
            Some(_) => None,
        }
    }

    /// The block number, `head` for `latest`; `None` for another tag.
    pub fn at(self, head: u64) -> Option<u64> {
        match self {
            Bound::Number(n) => Some(n),
            Bound::Latest => Some(head),
            Bound::Earliest => Some(0),
            Bound::Other => None,
        }
    }

    /// The block number, when the filter names one.
    pub fn number(self) -> Option<u64> {
        match self {
            Bound::Number(n) => Some(n),
            _ => None,
        }
    }

    /// Whether it needs the head to be a number.
    pub fn needs_head(self) -> bool {
        self == Bound::Latest
    }
}

/// The range an `eth_getLogs` call's `params` ask for: its `fromBlock` and `toBlock`; `None` for
/// a filter by `blockHash` or params that are not one filter object (they go as asked).
pub fn range_of(params: &Value) -> Option<(Bound, Bound)> {
    let filter = params
        .as_array()
        .filter(|p| p.len() == 1)?
        .first()?
        .as_object()?;
    if filter.contains_key("blockHash") {
        return None;
    }
    Some((
        Bound::of(filter.get("fromBlock"))?,
        Bound::of(filter.get("toBlock"))?,
    ))
}

/// `params` (one filter object) for the blocks `piece` alone: `fromBlock` and `toBlock` as
/// quantities, the rest of the filter unchanged.
pub fn piece_params(params: &Value, piece: pieces::Piece) -> Value {
    let mut params = params.clone();
    if let Some(filter) = params.get_mut(0).and_then(Value::as_object_mut) {
        filter.insert(
            "fromBlock".into(),
            crate::hex::encode_quantity(piece.from).into(),
        );
        filter.insert(
            "toBlock".into(),
            crate::hex::encode_quantity(piece.to).into(),
        );
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_filters_range_is_read_from_its_bounds() {
        assert_eq!(
            range_of(&json!([{"fromBlock": "0x10", "toBlock": "latest"}])),
            Some((Bound::Number(16), Bound::Latest))
        );
        assert_eq!(range_of(&json!([{}])), Some((Bound::Latest, Bound::Latest)));
        assert_eq!(
            range_of(&json!([{"fromBlock": "earliest", "toBlock": "safe"}])),
            Some((Bound::Earliest, Bound::Other))
        );
        assert_eq!(
            range_of(&json!([{"blockHash": "0xab"}])),
            None,
            "by hash: as asked"
        );
        assert_eq!(range_of(&json!([{"fromBlock": "0xzz"}])), None);
        assert_eq!(range_of(&json!([{"fromBlock": 5}])), None);
        assert_eq!(range_of(&json!([])), None);
    }

    #[test]
    fn a_pieces_params_keep_the_filter_and_name_its_blocks() {
        let params =
            json!([{"fromBlock": "0x1", "toBlock": "latest", "address": "0xaa", "topics": [null]}]);
        let piece = piece_params(&params, pieces::Piece { from: 8, to: 15 });
        assert_eq!(
            piece,
            json!([{"fromBlock": "0x8", "toBlock": "0xf", "address": "0xaa", "topics": [null]}])
        );
    }
}
