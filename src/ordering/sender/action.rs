//! What the sender's machine and its Durable Object say to each other: the events the object
//! feeds in (a client's transaction with its [`Ticket`], a [`Found`] lookup, a [`Sent`] answer,
//! [`Loaded`] rows) and the [`Action`]s it hands back for the object to carry out.

use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
use crate::transaction::TxHash;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use uuid::Uuid;

/// One client's wait for one answer: a copy of a transaction, or a pending-count question. The
/// object numbers them; the machine answers each exactly once ([`Action::Answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// One upstream lookup the machine asked for ([`Action::Lookup`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LookupId(pub u64);

/// Identifies one holding of a sender's lock (a UUID v4): only the holding it names can release
/// the lock; an answer that names another holding is late and answers nobody.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionKey(pub Uuid);

impl SessionKey {
    /// A fresh random (v4) session key.
    pub fn new() -> Self {
        SessionKey(Uuid::new_v4())
    }
}

impl Default for SessionKey {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A transaction arriving at its sender's object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// The transaction hash (keccak-256 of the EIP-2718 envelope).
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// The `eth_sendRawTransaction` request text sent upstream, with the original signed bytes.
    pub request: Rc<str>,
    /// The client request's `X-Request-Id`, put on the metrics about it.
    pub request_id: Option<Rc<str>>,
    /// A send-and-wait call (`eth_sendRawTransactionSync`, EIP-7966): a nonce gap at its turn is
    /// answered with code 6 and the expected nonce instead of being sent.
    pub sync: bool,
}

/// What one lookup asks the upstream, as one JSON-RPC batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `eth_getTransactionCount(sender, "pending")`.
    pub pending: bool,
    /// `eth_getTransactionCount(sender, "latest")`: the mined count.
    pub latest: bool,
    /// `eth_getBlockByNumber("0x0", false)`: the chain's genesis hash.
    pub genesis: bool,
    /// `eth_getTransactionByHash` of each (pending or mined: the upstream holds it).
    pub hashes: Vec<TxHash>,
    /// `eth_getTransactionBySenderAndNonce` of each nonce (reth, Erigon and anvil serve it; geth
    /// does not, and its error leaves the member out): which transaction holds the nonce.
    pub nonces: Vec<u64>,
}

/// What the upstream says of one transaction hash (`eth_getTransactionByHash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// It does not have it (`null`).
    Missing,
    /// In its pool (`blockNumber` null).
    Pending,
    /// In a block.
    Included {
        /// The block number.
        block: u64,
    },
}

/// What the upstream answered to a [`Query`]. A part is `None` when it was not asked or its
/// answer was unusable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// The pending transaction count.
    pub pending: Option<u64>,
    /// The mined transaction count.
    pub latest: Option<u64>,
    /// The genesis block hash, lowercase 0x hex.
    pub genesis: Option<String>,
    /// For each hash asked and answered: what the upstream says of it.
    pub known: HashMap<TxHash, Seen>,
    /// For each nonce asked and answered with a transaction: that transaction's hash.
    pub by_nonce: HashMap<u64, TxHash>,
}

impl Found {
    /// Whether the upstream holds `hash` (pending or in a block); `None` when not answered.
    pub fn holds(&self, hash: &TxHash) -> Option<bool> {
        self.known.get(hash).map(|seen| *seen != Seen::Missing)
    }
}

/// A lookup's outcome: what it found (maybe in part), or why the upstream could not be used by
/// the lookup's deadline.
pub type Outcome = Result<Found, String>;

/// The final answer to a holder's send (after retries and the lookup by hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// What the answer means.
    pub class: AnswerClass,
    /// What the client gets.
    pub answer: Answer,
    /// How many times the bytes were sent.
    pub attempts: u32,
}

/// A transaction read back from storage for a resend ([`Action::Load`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The transaction hash.
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// The request text stored before its first send.
    pub request: Rc<str>,
}

/// A transaction kept in the object's storage (table `txs`) from before its first send until it
/// leaves the idempotency window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The transaction hash.
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// The request text with the original signed bytes.
    pub request: Rc<str>,
    /// When it was stored, Unix ms.
    pub at_ms: u64,
}

impl From<&Row> for Loaded {
    fn from(row: &Row) -> Self {
        Loaded {
            hash: row.hash,
            nonce: row.nonce,
            request: row.request.clone(),
        }
    }
}

/// What the object is to do, in the order given. Storage actions are synchronous SQL; the
/// platform's output gate holds every later send until they are on disk.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Answer a client's ticket. `retry_after_s`: the `Retry-After` the HTTP answer carries.
    Answer {
        /// The ticket.
        ticket: Ticket,
        /// Its answer.
        answer: Answer,
        /// For a refusal the client may retry later, the seconds to wait.
        retry_after_s: Option<u64>,
    },
    /// Store the holder's transaction before its first send (a restarted object finds it there).
    Store(Row),
    /// Delete these transactions from storage.
    Forget(Vec<TxHash>),
    /// Delete every stored transaction: they belong to another chain.
    Wipe,
    /// Nothing is queued, tracked or stored any more: delete all of the object's storage (a
    /// sender seen once is not stored for good).
    Vacate,
    /// Store the genesis hash of the chain the stored state belongs to.
    StoreChain(String),
    /// Read these stored transactions back and report them with `loaded` (missing ones left out).
    Load(Vec<TxHash>),
    /// Send the holder's transaction: its original request text, retried while the answer says
    /// nothing about it, until `deadline_ms` (Unix ms); report with `sent`.
    Send {
        /// The holding's session key.
        session_key: SessionKey,
        /// The transaction hash.
        hash: TxHash,
        /// Its nonce.
        nonce: u64,
        /// The request text.
        request: Rc<str>,
        /// The holder's deadline, Unix ms.
        deadline_ms: u64,
        /// The `X-Request-Id` of the client request that brought it, for the send's metrics.
        request_id: Option<Rc<str>>,
    },
    /// Ask the upstream (one batch, retried while it can't be used, until `deadline_ms`); report
    /// with `looked_up`.
    Lookup {
        /// The lookup.
        id: LookupId,
        /// What to ask.
        query: Query,
        /// When to give up, Unix ms.
        deadline_ms: u64,
    },
    /// Set the storage alarm at this time (Unix ms), or delete it (`None`).
    Alarm(Option<u64>),
    /// Record an operator metric.
    Emit(Metric),
}
