//! A block as its header names it ([`Header`]: number, hash, parent's hash) and what the header
//! says of the block's contents ([`Contents`]: its logs [`Bloom`], transactions and receipts
//! roots): what the cache's chain view, its proofs and its answers' shapes all read. Pure.

use crate::hex;
use serde_json::Value;
use sha3::{Digest, Keccak256};

/// The root of an empty Merkle-Patricia trie (`keccak256(rlp(""))`): a block's
/// `transactionsRoot` and `receiptsRoot` when it has no transaction (the Yellow Paper, 4.3).
pub const EMPTY_TRIE_ROOT: [u8; 32] = [
    0x56, 0xe8, 0x1f, 0x17, 0x1b, 0xcc, 0x55, 0xa6, 0xff, 0x83, 0x45, 0xe6, 0x92, 0xc0, 0xf8, 0x6e,
    0x5b, 0x48, 0xe0, 0x1b, 0x99, 0x6c, 0xad, 0xc0, 0x01, 0x62, 0x2f, 0xb5, 0xe3, 0x63, 0xb4, 0x21,
];

/// A block's 2048-bit logs bloom (the Yellow Paper, 4.3.1; geth `types.Bloom`): each log's
/// address and topics set three bits each.
#[derive(Clone, PartialEq, Eq)]
pub struct Bloom(pub [u8; 256]);

impl std::fmt::Debug for Bloom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bloom({} bits set)",
            self.0.iter().map(|b| b.count_ones()).sum::<u32>()
        )
    }
}

impl Bloom {
    /// The three (byte, mask) places `data` sets: the low 11 bits of each of the first three
    /// big-endian 16-bit words of its keccak-256 (geth `bloomValues`).
    fn places(data: &[u8]) -> [(usize, u8); 3] {
        let hash = Keccak256::digest(data);
        let place = |i: usize| {
            let bit = (u16::from_be_bytes([hash[i], hash[i + 1]]) & 0x7ff) as usize;
            (255 - bit / 8, 1u8 << (bit % 8))
        };
        [place(0), place(2), place(4)]
    }

    /// Whether `data` (an address or a topic, as bytes) may be in the bloom: false means it is
    /// not in any log of the block.
    pub fn may_contain(&self, data: &[u8]) -> bool {
        Self::places(data)
            .iter()
            .all(|&(byte, mask)| self.0[byte] & mask != 0)
    }

    /// Sets `data`'s bits (tests build blocks' blooms with it).
    pub fn accrue(&mut self, data: &[u8]) {
        for (byte, mask) in Self::places(data) {
            self.0[byte] |= mask;
        }
    }

    /// Whether no bit is set: the block has no log at all.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
}

/// What a header says of its block's contents: its `logsBloom`, `transactionsRoot` and
/// `receiptsRoot` ([`Contents::of_block`]). 320 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// `logsBloom`.
    pub logs_bloom: Bloom,
    /// `transactionsRoot`.
    pub transactions_root: [u8; 32],
    /// `receiptsRoot`.
    pub receipts_root: [u8; 32],
}

impl Contents {
    /// The bytes one takes in memory, counted in `CACHE_MAX_BYTES`.
    pub const BYTES: usize = std::mem::size_of::<Contents>();

    /// The contents named by a block object (an `eth_getBlockBy*` result, a `newHeads`
    /// notification's header): `None` when it lacks any of the three or one is malformed.
    pub fn of_block(block: &Value) -> Option<Contents> {
        let bloom = hex::decode_array::<256>(block.get("logsBloom")?.as_str()?)?;
        Some(Contents {
            logs_bloom: Bloom(bloom),
            transactions_root: hex::decode_array(block.get("transactionsRoot")?.as_str()?)?,
            receipts_root: hex::decode_array(block.get("receiptsRoot")?.as_str()?)?,
        })
    }

    /// Whether the block has no transaction (and so no receipt, no log): both roots are the
    /// empty trie's.
    pub fn is_empty_block(&self) -> bool {
        self.transactions_root == EMPTY_TRIE_ROOT && self.receipts_root == EMPTY_TRIE_ROOT
    }
}

/// A block as a header names it: its number, hash and parent's hash (hashes lowercase hex), and
/// what it says of the block's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Its number.
    pub number: u64,
    /// Its hash, `0x` + 64 lowercase hex digits.
    pub hash: String,
    /// Its parent's hash, the same way.
    pub parent_hash: String,
    /// Its `logsBloom`, `transactionsRoot` and `receiptsRoot`, when the block object had them
    /// ([`Contents::of_block`]): what proves an empty answer about the block.
    pub contents: Option<Box<Contents>>,
}

impl Header {
    /// The header of a block object (`eth_getBlockByNumber` / `eth_getBlockByHash`'s `result`,
    /// a `newHeads` notification's): `None` when it lacks any of the three or is not one.
    pub fn of_block(block: &Value) -> Option<Header> {
        let number = hex::decode_quantity(block.get("number")?.as_str()?).ok()?;
        let hash = block_hash(block.get("hash")?)?;
        let parent_hash = block_hash(block.get("parentHash")?)?;
        Some(Header {
            number,
            hash,
            parent_hash,
            contents: Contents::of_block(block).map(Box::new),
        })
    }
}

/// A 32-byte hash as lowercase hex, when `value` is one.
fn block_hash(value: &Value) -> Option<String> {
    let s = value.as_str()?;
    let digits = s.strip_prefix("0x")?;
    (digits.len() == 64 && digits.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| s.to_ascii_lowercase())
}
