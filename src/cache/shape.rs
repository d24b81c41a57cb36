//! What an answer names, read in one streaming pass ([`Shape::read`]): whether it is `null`, a
//! block object's number, hash, parent and contents, a transaction's or receipt's block, and for a
//! list (logs, receipts) how many items and which blocks they name, each block once. Nothing else
//! of the answer is kept: a 12 MB `eth_getLogs` answer costs the blocks it names, not a `Value`
//! tree several times its size (the rules of `finality.rs` and `proof.rs` read only this). Pure.

use super::header::{Bloom, Contents, Header};
use crate::hex;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeMap;
use std::fmt;

/// One object's members that name a block: its own (`number`, `hash`, `parentHash`, and what
/// it says of its contents) and the block it is in (`blockNumber`, `blockHash`). Hashes are
/// lowercase hex.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Named {
    /// `number`.
    pub number: Option<u64>,
    /// `hash`.
    pub hash: Option<String>,
    /// `parentHash`.
    pub parent_hash: Option<String>,
    /// `logsBloom`, `transactionsRoot`, `receiptsRoot`, when all three are there.
    pub contents: Option<Box<Contents>>,
    /// `blockNumber` (`None` when absent or `null`: a transaction not in a block yet).
    pub block_number: Option<u64>,
    /// `blockHash`.
    pub block_hash: Option<String>,
    /// `oldestBlock` and the length of `gasUsedRatio` (an `eth_feeHistory` answer): the blocks
    /// it covers.
    pub fee_blocks: Option<(u64, usize)>,
}

impl Named {
    /// The block it is (a block object, a `newHeads` header): `None` without its number, hash
    /// and parent.
    pub fn header(&self) -> Option<Header> {
        Some(Header {
            number: self.number?,
            hash: self.hash.clone()?,
            parent_hash: self.parent_hash.clone()?,
            contents: self.contents.clone(),
        })
    }

    /// The newest block an `eth_feeHistory` answer covers (`oldestBlock` plus the length of
    /// `gasUsedRatio`, less one).
    pub fn newest_fee_block(&self) -> Option<u64> {
        let (oldest, count) = self.fee_blocks?;
        oldest.checked_add(u64::try_from(count).ok()?.checked_sub(1)?)
    }

    /// The block it is in (a transaction, a receipt, a log): `(blockNumber, blockHash)`.
    pub fn in_block(&self) -> Option<(u64, &str)> {
        Some((self.block_number?, self.block_hash.as_deref()?))
    }
}

/// What an answer's `result` is, as far as the cache's rules read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// `null`.
    Null,
    /// A string (a quantity, data).
    Text(String),
    /// An object.
    One(Named),
    /// A list: how many items, and the blocks they name (each item's `blockNumber` and
    /// `blockHash`, every hash named at each number).
    List {
        /// Its length.
        len: usize,
        /// The blocks named, by number.
        blocks: BTreeMap<u64, Vec<String>>,
    },
    /// Anything else (a number, a boolean).
    Other,
}

impl Shape {
    /// Reads `result` (JSON text) in one pass; `None` when it is not JSON.
    pub fn read(result: &str) -> Option<Shape> {
        let mut de = serde_json::Deserializer::from_str(result);
        let shape = de.deserialize_any(ShapeVisitor).ok()?;
        de.end().ok()?;
        Some(shape)
    }

    /// Every `(number, hash)` of a block it names: a block object's own (one with a number, a
    /// hash and a parent), a transaction's or receipt's block, each listed item's.
    pub fn blocks_named(&self) -> Vec<(u64, &str)> {
        match self {
            Shape::One(named) => named
                .in_block()
                .into_iter()
                .chain(
                    named
                        .number
                        .zip(named.hash.as_deref())
                        .filter(|_| named.parent_hash.is_some()),
                )
                .collect(),
            Shape::List { blocks, .. } => blocks
                .iter()
                .flat_map(|(n, hashes)| hashes.iter().map(move |h| (*n, h.as_str())))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The block object it is, when it is one.
    pub fn header(&self) -> Option<Header> {
        match self {
            Shape::One(named) => named.header(),
            _ => None,
        }
    }
}

/// A hash as lowercase hex, when `s` is a 32-byte one.
fn hash_of(s: &str) -> Option<String> {
    let digits = s.strip_prefix("0x")?;
    (digits.len() == 64 && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| s.to_ascii_lowercase())
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC result")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Shape, E> {
        Ok(Shape::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Shape, E> {
        Ok(Shape::Null)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Shape, E> {
        Ok(Shape::Text(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shape, A::Error> {
        NamedVisitor.visit_map(map).map(Shape::One)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut len = 0;
        let mut blocks: BTreeMap<u64, Vec<String>> = BTreeMap::new();
        while let Some(item) = seq.next_element::<Item>()? {
            len += 1;
            if let Some((n, hash)) = item.0.as_ref().and_then(|named| named.in_block()) {
                let hashes = blocks.entry(n).or_default();
                if !hashes.iter().any(|h| h == hash) {
                    hashes.push(hash.to_string());
                }
            }
        }
        Ok(Shape::List { len, blocks })
    }
}

/// One item of a list: an object's [`Named`] members, anything else skipped.
struct Item(Option<Named>);

impl<'de> de::Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Item, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an item")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Item, A::Error> {
                NamedVisitor.visit_map(map).map(|n| Item(Some(n)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Item(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Item, E> {
                Ok(Item(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Item, E> {
                Ok(Item(None))
            }
        }
        d.deserialize_any(ItemVisitor)
    }
}

/// An object's members that name a block; every other member skipped unread
/// ([`IgnoredAny`]).
struct NamedVisitor;

impl NamedVisitor {
    fn visit_map<'de, A: MapAccess<'de>>(self, mut map: A) -> Result<Named, A::Error> {
        let mut named = Named::default();
        let (mut bloom, mut tx_root, mut receipts_root) = (None, None, None);
        let (mut oldest, mut ratios) = (None, None);
        while let Some(key) = map.next_key::<Key>()? {
            if key == Key::Other {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            if key == Key::GasUsedRatio {
                ratios = Some(map.next_value::<Count>()?.0);
                continue;
            }
            let text = map.next_value::<Option<String>>()?;
            match key {
                Key::Number => named.number = quantity(text),
                Key::Hash => named.hash = text.as_deref().and_then(hash_of),
                Key::ParentHash => named.parent_hash = text.as_deref().and_then(hash_of),
                Key::BlockNumber => named.block_number = quantity(text),
                Key::BlockHash => named.block_hash = text.as_deref().and_then(hash_of),
                Key::LogsBloom => bloom = text.and_then(|s| hex::decode_array::<256>(&s)),
                Key::TransactionsRoot => tx_root = text.and_then(|s| hex::decode_array(&s)),
                Key::ReceiptsRoot => receipts_root = text.and_then(|s| hex::decode_array(&s)),
                Key::OldestBlock => oldest = quantity(text),
                Key::GasUsedRatio | Key::Other => {}
            }
        }
        named.fee_blocks = oldest.zip(ratios);
        if let (Some(b), Some(t), Some(r)) = (bloom, tx_root, receipts_root) {
            named.contents = Some(Box::new(Contents {
                logs_bloom: Bloom(b),
                transactions_root: t,
                receipts_root: r,
            }));
        }
        Ok(named)
    }
}

/// The members [`NamedVisitor`] reads, told apart without allocating the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Number,
    Hash,
    ParentHash,
    BlockNumber,
    BlockHash,
    LogsBloom,
    TransactionsRoot,
    ReceiptsRoot,
    OldestBlock,
    GasUsedRatio,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "number" => Key::Number,
                    "hash" => Key::Hash,
                    "parentHash" => Key::ParentHash,
                    "blockNumber" => Key::BlockNumber,
                    "blockHash" => Key::BlockHash,
                    "logsBloom" => Key::LogsBloom,
                    "transactionsRoot" => Key::TransactionsRoot,
                    "receiptsRoot" => Key::ReceiptsRoot,
                    "oldestBlock" => Key::OldestBlock,
                    "gasUsedRatio" => Key::GasUsedRatio,
                    _ => Key::Other,
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

/// How many items a list has, each skipped unread.
struct Count(usize);

impl<'de> de::Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
        struct CountVisitor;
        impl<'de> Visitor<'de> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
        }
        d.deserialize_seq(CountVisitor)
    }
}

/// A hex quantity's value.
fn quantity(text: Option<String>) -> Option<u64> {
    hex::decode_quantity(&text?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hash(n: u8) -> String {
        format!("0x{}", format!("{n:02x}").repeat(32))
    }

    #[test]
    fn a_block_object_names_itself_and_a_receipt_its_block() {
        let block = json!({"number": "0x10", "hash": hash(1).to_uppercase().replace("0X", "0x"), "parentHash": hash(2), "transactions": [{"blockNumber": "0x10", "blockHash": hash(1)}], "extra": {"deep": [1, 2]}});
        let shape = Shape::read(&block.to_string()).unwrap();
        let header = shape.header().unwrap();
        assert_eq!(
            (header.number, header.hash, header.parent_hash),
            (16, hash(1), hash(2))
        );
        let receipt =
            json!({"blockNumber": "0x10", "blockHash": hash(1), "logs": [{"blockNumber": "0x99"}]});
        let shape = Shape::read(&receipt.to_string()).unwrap();
        assert_eq!(shape.blocks_named(), vec![(16, hash(1).as_str())]);
        assert_eq!(shape.header(), None);
        let pending = json!({"hash": hash(3), "blockNumber": null, "blockHash": null});
        assert_eq!(
            Shape::read(&pending.to_string()).unwrap().blocks_named(),
            vec![]
        );
    }

    #[test]
    fn a_list_names_each_block_once_and_counts_its_items() {
        let logs: Vec<_> = (0..1000)
            .map(|i| json!({"blockNumber": format!("{:#x}", 5 + i % 2), "blockHash": hash(5 + (i % 2) as u8), "data": "0x00"}))
            .collect();
        let shape = Shape::read(&serde_json::Value::from(logs).to_string()).unwrap();
        match &shape {
            Shape::List { len, blocks } => {
                assert_eq!(*len, 1000);
                assert_eq!(blocks.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Shape::read("[]").unwrap(),
            Shape::List {
                len: 0,
                blocks: BTreeMap::new()
            }
        );
        assert_eq!(Shape::read("null").unwrap(), Shape::Null);
        assert_eq!(Shape::read("\"0x0\"").unwrap(), Shape::Text("0x0".into()));
        assert_eq!(
            Shape::read("[1, \"a\", [2], null]").unwrap(),
            Shape::List {
                len: 4,
                blocks: BTreeMap::new()
            }
        );
        assert_eq!(Shape::read("{\"a\": 1"), None);
        assert_eq!(Shape::read("1 2"), None);
    }

    #[test]
    fn a_fee_history_names_the_blocks_it_covers() {
        let history = json!({"oldestBlock": "0x15", "baseFeePerGas": ["0x1", "0x1", "0x1"], "gasUsedRatio": [0.5, 0.1], "reward": [["0x1"], ["0x2"]]});
        let Shape::One(named) = Shape::read(&history.to_string()).unwrap() else {
            panic!("an object");
        };
        assert_eq!(named.newest_fee_block(), Some(0x16));
        let empty = json!({"oldestBlock": "0x15", "gasUsedRatio": []});
        let Shape::One(named) = Shape::read(&empty.to_string()).unwrap() else {
            panic!("an object");
        };
        assert_eq!(named.newest_fee_block(), None);
    }

    #[test]
    fn a_blocks_contents_are_read_with_it() {
        let block = json!({"number": "0x1", "hash": hash(1), "parentHash": hash(0), "logsBloom": hex::encode(&[0u8; 256]), "transactionsRoot": hex::encode(&super::super::header::EMPTY_TRIE_ROOT), "receiptsRoot": hex::encode(&super::super::header::EMPTY_TRIE_ROOT)});
        let header = Shape::read(&block.to_string()).unwrap().header().unwrap();
        assert!(header.contents.unwrap().is_empty_block());
    }
}
