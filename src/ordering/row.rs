//! A transaction's row in its sender's storage: what it keeps there (its raw bytes and
//! [`SignedTx::row_method`], at most [`MAX_ROW_LEN`] bytes) and how a row is read back
//! ([`SignedTx::from_row`]; the request text that rows of earlier releases hold,
//! [`SignedTx::from_request_text`]), or why it is not a send of its hash ([`RowError`]); and what
//! tracking keeps in it ([`RowProgress`]).

use crate::jsonrpc;
use crate::ordering::private_terms::PrivateTerms;
use crate::ordering::send_params::{send_params, SyncTimeouts};
use crate::ordering::tx::{SendMethod, SignedTx};
use crate::transaction::TxHash;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The most a transaction may keep in one row of its sender's storage, bytes
/// ([`SignedTx::row_len`]): a SQLite-backed Durable Object holds at most 2 MB in a string,
/// BLOB or row (Cloudflare's Durable Objects limits), less 4 KiB for the row's other columns.
pub const MAX_ROW_LEN: usize = 2_000_000 - 4_096;

/// A transaction too large to keep in its sender's storage: it is refused before it is sent
/// (-32005 with this wording), since a send the relay cannot store cannot be resent or followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge {
    /// What it would keep, bytes.
    pub bytes: usize,
    /// [`MAX_ROW_LEN`].
    pub max: usize,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "transaction too large for the relay to store: {} bytes, at most {} (a Durable Object row holds 2 MB); not sent",
            self.bytes, self.max
        )
    }
}

/// Why a row read back (or the request text of an earlier release) is not a send of the
/// transaction its row names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowError {
    /// Not one JSON-RPC request object.
    NotARequest,
    /// A request for another method.
    NotASend(String),
    /// Its raw transaction is missing, not hex, or does not decode.
    BadRaw(String),
    /// Its raw transaction decodes to another hash.
    OtherHash,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowError::NotARequest => write!(f, "not one JSON-RPC request"),
            RowError::NotASend(method) => write!(f, "not a send: {method}"),
            RowError::BadRaw(why) => write!(f, "its raw transaction: {why}"),
            RowError::OtherHash => write!(f, "its raw transaction has another hash"),
        }
    }
}

impl SignedTx {
    /// How its send method is written in its row beside its bytes: the method's serde form
    /// (`{"kind":"plain"}`, `{"kind":"conditional","options":{…}}`, or
    /// `{"kind":"private","max_block_number":N}`), with `"public_after_blocks":N` when its sender
    /// opted in to the public mempool ([`RowMethod`]). A send-and-wait call is stored as a plain
    /// send: nobody waits on a stored transaction's receipt.
    pub fn row_method(&self) -> String {
        let method = match &self.method {
            SendMethod::Sync { .. } => SendMethod::Plain,
            other => other.clone(),
        };
        let row = RowMethod {
            method,
            public_after_blocks: self.public_after_blocks,
        };
        serde_json::to_string(&row).expect("a send method always serializes")
    }

    /// What the transaction keeps in its row, bytes: its raw bytes and its row method
    /// ([`SignedTx::row_method`]), the row's other columns aside.
    pub fn row_len(&self) -> usize {
        self.raw.len() + self.row_method().len()
    }

    /// Why it cannot be kept in one row of its sender's storage ([`MAX_ROW_LEN`]), or
    /// `None` when it can.
    pub fn unstorable(&self) -> Option<TooLarge> {
        let bytes = self.row_len();
        (bytes > MAX_ROW_LEN).then_some(TooLarge {
            bytes,
            max: MAX_ROW_LEN,
        })
    }

    /// A row read back (the one row form: the raw bytes and the row method): a send
    /// whose raw transaction decodes to `hash`.
    ///
    /// # Errors
    /// [`RowError`]: the bytes do not decode, have another hash, or the method is not one.
    pub fn from_row(raw: Vec<u8>, method: &str, hash: &TxHash) -> Result<SignedTx, RowError> {
        let row = RowMethod::read(method)?;
        let mut tx = Self::read_back(raw, row.method, hash)?;
        tx.public_after_blocks = row.public_after_blocks;
        Ok(tx)
    }

    /// A stored transaction's bytes and method made a [`SignedTx`] again: its bytes must decode
    /// to `hash`; a send-and-wait call comes back as a plain send (nobody waits on a stored
    /// transaction's receipt).
    fn read_back(raw: Vec<u8>, method: SendMethod, hash: &TxHash) -> Result<SignedTx, RowError> {
        let method = match method {
            SendMethod::Sync { .. } => SendMethod::Plain,
            other => other,
        };
        let tx = crate::transaction::decode(&raw).map_err(|e| RowError::BadRaw(e.to_string()))?;
        if &tx.hash != hash {
            return Err(RowError::OtherHash);
        }
        Ok(SignedTx {
            hash: tx.hash,
            nonce: tx.nonce,
            chain_id: tx.chain_id,
            raw,
            method,
            public_after_blocks: None,
            self_cancel: tx.is_self_cancel(),
        })
    }

    /// A request a sender's object of an earlier release stored before a send (the request text),
    /// read back for a resend: parsed like any client's, a send whose raw transaction decodes to
    /// `hash`. The oldest rows hold the client's own text; what is sent again is what the relay
    /// reads in it. One stored as a send-and-wait call comes back as a plain send (it waits out
    /// a gap like any resend).
    ///
    /// # Errors
    /// [`RowError`]: why it is not a send of that transaction.
    pub fn from_request_text(text: &str, hash: &TxHash) -> Result<SignedTx, RowError> {
        let req = match jsonrpc::parse(text.as_bytes(), 1) {
            Ok(jsonrpc::Incoming::Single(Ok(req))) => req,
            _ => return Err(RowError::NotARequest),
        };
        if !jsonrpc::is_send(&req.method) {
            return Err(RowError::NotASend(req.method));
        }
        let (raw, method) = send_params(&req, NO_WAIT).map_err(|e| RowError::BadRaw(e.message))?;
        Self::read_back(raw, method, hash)
    }
}

/// The `method` column of a row: the send method's serde form and, flattened beside it, the
/// sender's opt-in to the public mempool (absent from rows of earlier releases, and when the
/// sender did not opt in). Releases before it read such a row's method and ignore the opt-in.
#[derive(Debug, Serialize, Deserialize)]
pub struct RowMethod {
    /// How it was sent.
    #[serde(flatten)]
    pub method: SendMethod,
    /// [`SignedTx::public_after_blocks`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_after_blocks: Option<u64>,
}

impl RowMethod {
    /// Reads a row's `method` column.
    ///
    /// # Errors
    /// [`RowError::NotASend`] when it is not a send method.
    pub fn read(text: &str) -> Result<RowMethod, RowError> {
        serde_json::from_str(text).map_err(|e| RowError::NotASend(e.to_string()))
    }

    /// What its sender asked of the private route ([`SignedTx::terms`]).
    pub fn terms(&self) -> PrivateTerms {
        PrivateTerms::of(&self.method, self.public_after_blocks)
    }
}

/// The timeouts a request read back is parsed with: nobody waits on it, so they do not matter.
const NO_WAIT: SyncTimeouts = SyncTimeouts {
    default_ms: 0,
    max_ms: 0,
};

/// What tracking learned of a stored transaction that must outlast the object's memory (a
/// hibernated object's is discarded: Durable Objects docs, "Lifecycle of a Durable Object"),
/// kept in its row (schema 3; an older storage keeps it in memory only) and read back with its
/// header: the resend cap holds, a sender's opt-in to the public mempool counts its blocks from
/// the same head, and what a private route took is not sent to it again, across hibernations and
/// restarts. Written only when it changes (a resend, a private route's acceptance, the first
/// check behind a private route that found it pending, its publishing): one row each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowProgress {
    /// How many times the relay sent it again because the upstream no longer had it.
    pub resent: u32,
    /// Behind a private route: the head block at the first check that found it pending.
    pub since_block: Option<u64>,
    /// Whether it was also sent to the public mempool (its sender's opt-in).
    pub public: bool,
    /// Whether the upstream is known to hold it. Kept for a private route's sends (the read
    /// node never sees the route's pool, so a new instance could not learn it again and would
    /// send each to the route again); for others a new instance asks by hash.
    pub vouched: bool,
    /// Behind several private routes, the one that last took it ([`TakenBy`]): its status is
    /// asked there first.
    pub taken_by: TakenBy,
    /// The route said its sender cancelled it while it stays pending (its sender's opt-in had
    /// published it, and the public copy may be mined): never sent to a route again.
    pub route_cancelled: bool,
}

/// Behind several private routes (`UPSTREAM_SEND_URL`, in order), the one that last took a
/// transaction, by its position (`None`: not known: a row of an earlier release, or a send whose
/// answer named no route). Routes are tried in the order of their health, not their position,
/// so it names no other route: any other may hold a copy from a send whose answer was lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TakenBy(pub Option<u8>);

impl TakenBy {
    /// Route `index` took it (past the 255th: not known).
    pub fn route(index: usize) -> TakenBy {
        TakenBy(u8::try_from(index).ok().filter(|&i| i < u8::MAX))
    }

    /// The route's position, when known.
    pub fn index(self) -> Option<usize> {
        self.0.map(usize::from)
    }

    /// The order in which to ask `count` routes about it: the one that took it first, then the
    /// others in route order.
    pub fn ask_order(self, count: usize) -> Vec<usize> {
        let first = self.index().filter(|&i| i < count);
        first
            .into_iter()
            .chain((0..count).filter(|&i| Some(i) != first))
            .collect()
    }

    /// Its form in a row (bits 1-8 of the `vouched` column: the position plus one, 0 when not
    /// known).
    pub fn to_bits(self) -> i64 {
        self.0.map_or(0, |i| i64::from(i) + 1)
    }

    /// Read back from a row ([`TakenBy::to_bits`]).
    pub fn from_bits(bits: i64) -> TakenBy {
        TakenBy(
            u8::try_from(bits & 0xff)
                .ok()
                .and_then(|b| b.checked_sub(1)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_that_took_it_is_asked_first_and_kept_in_eight_bits() {
        assert_eq!(TakenBy::route(1).ask_order(3), [1, 0, 2]);
        assert_eq!(TakenBy::default().ask_order(3), [0, 1, 2]);
        assert_eq!(
            TakenBy::route(5).ask_order(2),
            [0, 1],
            "a route no longer served"
        );
        for taken in [TakenBy::default(), TakenBy::route(0), TakenBy::route(254)] {
            assert_eq!(TakenBy::from_bits(taken.to_bits()), taken);
        }
        assert_eq!(TakenBy::route(255), TakenBy::default());
    }

    #[test]
    fn the_stored_form_reads_back_and_a_transaction_past_a_row_is_unstorable() {
        // EIP-155's example transfer (chain id 1, nonce 9), as in the wire tests.
        let raw = crate::hex::decode("0xf86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a76400008025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83").unwrap();
        let hash = crate::transaction::decode(&raw).unwrap().hash;
        let plain = r#"{"kind":"plain"}"#;
        let tx = SignedTx::from_row(raw.clone(), plain, &hash).unwrap();
        assert_eq!((tx.nonce, tx.chain_id), (9, Some(1)));
        assert_eq!(
            (tx.raw.clone(), tx.method.clone()),
            (raw.clone(), SendMethod::Plain)
        );
        assert_eq!(
            SignedTx::from_row(raw.clone(), plain, &[0; 32]),
            Err(RowError::OtherHash)
        );
        assert!(SignedTx::from_row(raw.clone(), "plain", &hash).is_err());
        assert!(SignedTx::from_row(vec![0xf8], plain, &hash).is_err());
        let mut big = tx.clone();
        big.raw = vec![0; MAX_ROW_LEN - plain.len()];
        assert_eq!(big.unstorable(), None);
        big.raw.push(0);
        let too_large = big.unstorable().unwrap();
        assert_eq!(too_large.bytes, MAX_ROW_LEN + 1);
        assert!(too_large
            .to_string()
            .starts_with("transaction too large for the relay to store: "));
    }
}
