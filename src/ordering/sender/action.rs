//! What the sender's machine and its Durable Object say to each other: the events the object
//! feeds in (a client's transaction with its [`Ticket`], a [`Found`] lookup, a [`Sent`] answer,
//! transactions read back from storage) and the [`Action`]s it hands back for the object to carry out.

use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
pub use crate::ordering::identifier::{LookupId, SessionKey, Ticket};
use crate::ordering::private_terms::PrivateTerms;
use crate::ordering::route_status::RouteStatus;
pub use crate::ordering::row::{RowProgress, TakenBy};
pub use crate::ordering::tombstone::Tombstone;
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// A transaction arriving at its sender's object.
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    /// The transaction.
    pub tx: Rc<SignedTx>,
    /// The client request's `X-Request-Id`, put on the metrics about it.
    pub request_id: Option<Rc<str>>,
}

/// What one lookup asks the upstream, as JSON-RPC batches of at most
/// [`crate::upstream::lookup::MAX_BATCH_MEMBERS`] members ([`crate::upstream::lookup`]).
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
    /// `eth_blockNumber`: the head, for the senders' opt-ins to the public mempool and
    /// `maxBlockNumber`s ([`crate::ordering::private_terms::PrivateTerms`]).
    pub head: bool,
    /// The private route's status of each (`SEND_STATUS_URL`, one `GET` each, beside the batch;
    /// [`crate::ordering::route_status`]).
    pub route_statuses: Vec<TxHash>,
    /// For those of `route_statuses` whose route is known ([`TakenBy`]): asked there first.
    pub route_holders: Vec<(TxHash, TakenBy)>,
    /// The longest the statuses may take, ms (`None`:
    /// [`crate::ordering::route_status::STATUS_TIMEOUT_MS`]): shorter where a send waits for
    /// them ([`crate::ordering::route_status::FIRST_SEND_STATUS_TIMEOUT_MS`]).
    pub route_status_timeout_ms: Option<u64>,
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
    /// The head block number.
    pub head: Option<u64>,
    /// For each hash whose status the private route gave: that status.
    pub route: HashMap<TxHash, RouteStatus>,
}

impl Found {
    /// Whether the upstream holds `hash` (pending or in a block); `None` when not answered.
    pub fn holds(&self, hash: &TxHash) -> Option<bool> {
        self.known.get(hash).map(|seen| *seen != Seen::Missing)
    }
}

/// A lookup's outcome: what it found (maybe in part), or why it found nothing.
pub type Outcome = Result<Found, LookupError>;

/// Why a lookup found nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The upstream could not be used by the lookup's deadline: its last error (redacted).
    Unavailable(String),
    /// Its task never reported back by its deadline and grace (the object lost it).
    NeverReported,
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::Unavailable(why) => f.write_str(why),
            LookupError::NeverReported => f.write_str("the lookup never reported back"),
        }
    }
}

/// The final answer to one transaction's send (after retries and the lookup by hash), from
/// [`crate::upstream::submit::submit`] to the machine ([`Sender::sent`](super::Sender::sent)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// What the answer means.
    pub class: AnswerClass,
    /// What the client gets: the upstream's `result` or `error`, the hash for an already-known
    /// transaction, or the relay's -32002/-32603 error when there was no usable answer.
    pub answer: Answer,
    /// How many times the bytes were sent.
    pub attempts: u32,
    /// Behind a private route, which one gave the answer (its position in `UPSTREAM_SEND_URL`),
    /// when the platform says.
    pub route: Option<usize>,
}

/// A transaction kept in the object's storage (its raw bytes and send method,
/// `crate::ordering::row`; [`crate::ordering::store`]) from before its first send until it
/// leaves the idempotency window.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The transaction.
    pub tx: Rc<SignedTx>,
    /// When it was stored, Unix ms.
    pub at_ms: u64,
}

/// A stored transaction's row as a restarted object first reads it: what it needs to ask the
/// upstream about it, without its bytes (read back with [`Action::Load`] when it is to be sent
/// again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowHeader {
    /// The transaction hash.
    pub hash: TxHash,
    /// Its nonce.
    pub nonce: u64,
    /// When it was stored, Unix ms.
    pub at_ms: u64,
    /// What its sender asked of the private route (kept in its row's method).
    pub terms: PrivateTerms,
    /// What tracking learned of it that must outlast the object's memory.
    pub progress: RowProgress,
}

/// A row the platform refused to store for its own content (SQLite's `SQLITE_TOOBIG`: a string,
/// BLOB or row over its limit), with the platform's message: the instance can still use its
/// storage ([`is_deterministic`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unstorable(pub String);

/// Whether a storage error message (workerd's SQLite errors read `"<message>: SQLITE_<CODE>"`)
/// is about the write itself (too big, a full database, a constraint), which the same write
/// would meet again, rather than an instance that lost its storage to a newer one.
pub fn is_deterministic(message: &str) -> bool {
    [
        "SQLITE_TOOBIG",
        "SQLITE_FULL",
        "SQLITE_CONSTRAINT",
        "too big",
        "database or disk is full",
    ]
    .iter()
    .any(|mark| message.contains(mark))
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
    /// These transactions' nonces are used in a block (included, or another transaction took
    /// the nonce there): their rows are no longer needed, and a restarted object that reads one
    /// back finds its nonce used. The store may overwrite them with the next transactions
    /// instead of deleting them ([`crate::ordering::store`]).
    Release(Vec<TxHash>),
    /// Delete every stored transaction: they belong to another chain.
    Wipe,
    /// Nothing is queued, tracked or stored any more: delete all of the object's storage (a
    /// sender seen once is not stored for good).
    Vacate,
    /// Store the genesis hash of the chain the stored state belongs to.
    StoreChain(String),
    /// Keep what tracking learned of a stored transaction in its row.
    Progress(TxHash, RowProgress),
    /// Keep a cancel's tombstone in storage: the transaction's row becomes it (its bytes gone),
    /// or one is written ([`crate::ordering::tombstone`]).
    Bury(Tombstone),
    /// Read these stored transactions back and report them with `loaded` (missing ones left out).
    Load(Vec<TxHash>),
    /// Send the holder's transaction: its original signed bytes, retried while the answer says
    /// nothing about it, until `deadline_ms` (Unix ms); report with `sent`.
    Send {
        /// The holding's session key.
        session_key: SessionKey,
        /// The transaction.
        tx: Rc<SignedTx>,
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
    /// Send these stored transactions to the public mempool as well (`UPSTREAM_RPC_URL`,
    /// `SEND_PUBLIC_AFTER_BLOCKS`): their original bytes, read from storage, one after another
    /// in the order given (nonce order), each with the retries of a send until `deadline_ms`
    /// (Unix ms); report each with `published`. A row no longer stored is left out.
    Publish {
        /// The transactions, lowest nonce first.
        hashes: Vec<TxHash>,
        /// When to give up, Unix ms.
        deadline_ms: u64,
    },
    /// Cancel pending private transaction `hash` at the route (`eth_cancelPrivateTransaction`,
    /// `[{"txHash"}]`), by `deadline_ms` (Unix ms); report the route's answer (or the relay's
    /// error) with [`Sender::cancel_answered`](super::Sender::cancel_answered).
    Cancel {
        /// The client waiting for the answer.
        ticket: Ticket,
        /// The transaction.
        hash: TxHash,
        /// Behind several routes, the one that took it (then every route is asked, that one's
        /// answer deciding); not known: the routes in order, as a send goes.
        routes: TakenBy,
        /// When to give up, Unix ms.
        deadline_ms: u64,
    },
    /// Set the storage alarm at this time (Unix ms), or delete it (`None`).
    Alarm(Option<u64>),
    /// Record an operator metric.
    Emit(Metric),
}

/// What carries out the machine's actions: the Durable Object's driver, and the native tests'
/// rigs. [`Sender::run`](super::Sender::run) polls every action and calls the method of each,
/// in order; storage methods are synchronous, and `load`'s transactions go back to the machine
/// at once.
pub trait Effects {
    /// The time, Unix ms.
    fn now_ms(&self) -> u64;
    /// [`Action::Answer`].
    fn answer(&mut self, ticket: Ticket, answer: Answer, retry_after_s: Option<u64>);
    /// [`Action::Store`]: `Err` when the platform refused this row for its own content (too big
    /// for a row, say), the instance's storage still usable; the machine then refuses the
    /// transaction unsent. (A failure that means the instance lost its storage is the driver's
    /// to handle: it stops.)
    fn store(&mut self, row: Row) -> Result<(), Unstorable>;
    /// [`Action::Forget`].
    fn forget(&mut self, hashes: Vec<TxHash>);
    /// [`Action::Release`].
    fn release(&mut self, hashes: Vec<TxHash>);
    /// [`Action::Wipe`].
    fn wipe(&mut self);
    /// [`Action::Vacate`].
    fn vacate(&mut self);
    /// [`Action::StoreChain`].
    fn store_chain(&mut self, genesis: String);
    /// [`Action::Progress`] (nothing when the row is not there).
    fn progress(&mut self, hash: TxHash, progress: RowProgress);
    /// [`Action::Bury`].
    fn bury(&mut self, tombstone: Tombstone);
    /// [`Action::Load`]: the stored transactions of `hashes` (missing ones left out).
    fn load(&mut self, hashes: &[TxHash]) -> Vec<Rc<SignedTx>>;
    /// [`Action::Send`]: report with [`Sender::sent`](super::Sender::sent).
    fn send(
        &mut self,
        session_key: SessionKey,
        tx: Rc<SignedTx>,
        deadline_ms: u64,
        request_id: Option<Rc<str>>,
    );
    /// [`Action::Lookup`]: report with [`Sender::looked_up`](super::Sender::looked_up).
    fn lookup(&mut self, id: LookupId, query: Query, deadline_ms: u64);
    /// [`Action::Publish`]: report each with [`Sender::published`](super::Sender::published).
    fn publish(&mut self, hashes: Vec<TxHash>, deadline_ms: u64);
    /// [`Action::Cancel`]: report with [`Sender::cancel_answered`](super::Sender::cancel_answered).
    fn cancel(&mut self, ticket: Ticket, hash: TxHash, routes: TakenBy, deadline_ms: u64);
    /// [`Action::Alarm`].
    fn alarm(&mut self, at_ms: Option<u64>);
    /// [`Action::Emit`].
    fn emit(&mut self, metric: Metric);
}
