//! A sender's storage: the SQLite tables its Durable Object keeps ([`Store`]), over the platform's
//! SQL ([`Sql`]: the object's `ctx.storage.sql`, or a real SQLite in the native tests).
//!
//! Schema 3 ([`SCHEMA_VERSION`]), what this release writes on a fresh storage: one table, `WITHOUT
//! ROWID` (so a write is one billed row), `meta` (`hash` TEXT primary key, `nonce` INTEGER, `raw`
//! BLOB, `method` TEXT, `at_ms` INTEGER, `chain` TEXT, `sender` TEXT, `chain_id` INTEGER, `schema`
//! INTEGER, `resent` INTEGER, `since_block` INTEGER, `public` INTEGER, `vouched` INTEGER: bit 0
//! vouched, bits 1-8 the private route that took it, bit 9 the route's word that its sender
//! cancelled it): each holder's
//! transaction, its raw bytes and its send method ([`SignedTx::row_method`]), written before its
//! first send, with what schema 2 kept in rows of their own (the genesis hash of the chain the
//! rows belong to, the sender, the chain id the Worker checked them against, the schema) and what
//! tracking learned of it that must outlast the object's memory ([`RowProgress`]: written when it
//! changes). A lone transaction so writes its table (two rows in
//! workerd's count) and its row, where schema 2 wrote two tables and four rows of meta besides
//! (BENCHMARKS.md, "A lone transaction's bill"). The table is named `meta` so that a release of
//! schema 2, whose first read is `SELECT key, value FROM meta`, finds no such column: its read
//! fails (not for a missing table), and it leaves the storage alone and fails open, as it does for
//! any storage it cannot read.
//!
//! Schema 2, still read and written where an earlier release left it (until the storage is
//! vacated or wiped; [`Form`]): `sends` (`hash`, `nonce`, `raw`, `method`, `at_ms`) and `meta`
//! (`key`, `value`: `schema` 2, `chain`, `sender`, `chain_id`); schema 1 kept the upstream
//! request's text in table `txs` (`request` TEXT): those rows are still read, resent and deleted.
//!
//! Either way, a row whose transaction is refused, expired, given up or replaced in the pool is
//! deleted. A row whose nonce is used in a block (included, or replaced by another transaction in
//! a block) is *released* instead: the next transaction stored overwrites it (one written row,
//! where a delete and an insert are two), and a restarted object that reads one back finds its
//! nonce used and lets it go.
//!
//! Nothing is created until the first write, so an object that is only read (a pending count, a
//! transaction's status) leaves no storage behind.
//!
//! Storage is never destroyed by what the object does not understand: a read that fails is
//! tried again once, then reported ([`ReadError::Unreadable`]), never taken for "nothing stored";
//! a `schema` newer than this code knows is [`ReadError::Newer`]. Either way the object leaves
//! its storage untouched and fails open (its sends go straight to the upstream) until it can
//! read it: a rollback, or a gradual deployment that steps down, never forgets in-flight
//! transactions.
//!
//! Every statement's rows written (the platform's `rowsWritten`, which Cloudflare bills) are
//! counted ([`Store::rows_written`]).

use crate::hex;
use crate::ordering::row::RowError;
use crate::ordering::row::{RowMethod, RowProgress, TakenBy};
use crate::ordering::sender::{Row, RowHeader};
use crate::ordering::tombstone::Tombstone;
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// The stored form this code writes on a fresh storage: 3 is one table, `meta`, a row per
/// transaction with the chain, the sender and the chain id in it. 2 (tables `sends` and a
/// key-value `meta`) and 1 (rows in table `txs`, the request text) are still read. An object that
/// finds a higher one leaves its storage alone ([`ReadError::Newer`]).
pub const SCHEMA_VERSION: u32 = 3;

/// The `schema` of a cancel's tombstone row ([`Store::bury`]): schema 3's columns, its `raw`
/// empty and its `method` [`TOMBSTONE_METHOD`]; any other row saying 4 is newer than this code.
/// A release that knows only 3 finds it newer and leaves the storage alone (fails open) rather
/// than take the row for a transaction to send.
pub const TOMBSTONE_SCHEMA: u32 = 4;

/// The `method` of a cancel's tombstone row.
pub const TOMBSTONE_METHOD: &str = "cancelled";

/// The highest `schema` a key-value `meta` (schema 2's) may say.
const KEY_VALUE_SCHEMA: u32 = 2;

/// A value bound to a statement or read from a row (SQLite's storage classes).
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    /// NULL.
    Null,
    /// INTEGER.
    Integer(i64),
    /// REAL.
    Real(f64),
    /// TEXT.
    Text(String),
    /// BLOB.
    Blob(Vec<u8>),
}

impl SqlValue {
    fn text(&self) -> Option<&str> {
        match self {
            SqlValue::Text(text) => Some(text),
            _ => None,
        }
    }

    fn number(&self) -> Option<u64> {
        match self {
            SqlValue::Integer(n) => u64::try_from(*n).ok(),
            SqlValue::Real(n) if *n >= 0.0 => Some(*n as u64),
            _ => None,
        }
    }
}

impl From<&str> for SqlValue {
    fn from(text: &str) -> Self {
        SqlValue::Text(text.to_string())
    }
}

impl From<String> for SqlValue {
    fn from(text: String) -> Self {
        SqlValue::Text(text)
    }
}

/// What a statement gave back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SqlRows {
    /// Its rows, each its columns in order.
    pub rows: Vec<Vec<SqlValue>>,
    /// The rows it wrote (inserted, updated or deleted; a table made is two): the platform's
    /// `rowsWritten`, which Cloudflare bills ($1.00 per million).
    pub written: u64,
}

/// The object's SQL: the Durable Object's `ctx.storage.sql` (synchronous; the platform's output
/// gate holds any later send until the writes are on disk), or a real SQLite in the native tests.
pub trait Sql {
    /// Runs `sql` with `bindings` (`?` placeholders, in order).
    ///
    /// # Errors
    /// The platform's message (workerd's SQLite errors read `"<message>: SQLITE_<CODE>"`; a
    /// missing table `"no such table: <name>"`).
    fn exec(&self, sql: &str, bindings: Vec<SqlValue>) -> Result<SqlRows, String>;
}

/// A storage call that failed: which one, and the platform's message. On a write, it means the
/// instance can no longer use its storage (a newer instance superseded it), unless the message
/// is about the row itself ([`crate::ordering::sender::is_deterministic`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageError {
    /// The call (`store`, `forget`, `release`, `wipe`, `chain`, `chain_id`, `load_send`,
    /// `load_request`, `read`...).
    pub op: &'static str,
    /// The platform's message.
    pub message: String,
}

impl StorageError {
    fn of(op: &'static str, message: String) -> Self {
        StorageError { op, message }
    }

    /// Its log line (`storage_error`), for `sender` (lowercase 0x address) on chain `chain`
    /// (`null` while the chain id is not known).
    pub fn log_line(&self, chain: Option<u64>, sender: &str) -> String {
        crate::log::line(
            "storage_error",
            &[
                ("sender", sender.into()),
                ("chain", chain.into()),
                ("op", self.op.into()),
                ("error", self.message.clone().into()),
            ],
        )
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

/// Why the stored state cannot be used: the object then leaves its storage untouched and fails
/// open, and tries again at its next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// A read failed twice (not for a missing table: that is nothing stored).
    Unreadable(StorageError),
    /// `meta` `schema` is one this code does not know: written by a newer release.
    Newer {
        /// The stored value.
        found: String,
    },
    /// The stored transactions were checked against another chain id than the one this object
    /// now serves (its chain moved: `CHAIN_ID` changed under the default chain's objects). They
    /// are kept untouched, never sent on this chain; its sends fail open.
    OtherChain(OtherChain),
}

/// What an object whose storage belongs to another chain keeps ([`ReadError::OtherChain`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherChain {
    /// The chain id the stored transactions were checked against.
    pub stored: u64,
    /// The chain id this object now serves.
    pub serving: u64,
    /// The stored transactions (hash, nonce), oldest first.
    pub rows: Vec<(TxHash, u64)>,
    /// When the newest was stored, Unix ms.
    pub newest_ms: u64,
}

impl ReadError {
    /// A short name for logs and metrics: `unreadable`, `newer_schema`, `other_chain`.
    pub fn label(&self) -> &'static str {
        match self {
            ReadError::Unreadable(_) => "unreadable",
            ReadError::Newer { .. } => "newer_schema",
            ReadError::OtherChain(_) => "other_chain",
        }
    }
}

/// How long an object whose stored transactions it cannot serve (its chain no longer in
/// `CHAINS`, or its storage of another chain: [`ReadError::OtherChain`]) keeps waking itself to
/// look again, counted from its newest stored transaction, ms: a day, a redeploy that puts the
/// chain back within it is found at the next alarm. Past it the object stops (its storage kept,
/// found again by its sender's next request).
pub const UNSERVED_GIVE_UP_MS: u64 = 24 * 60 * 60 * 1_000;

/// When such an object's alarm comes back ([`UNSERVED_GIVE_UP_MS`]), Unix ms, from the time
/// `now_ms` and its newest stored transaction's `newest_ms`: an eighth of that age, at least a
/// minute and at most an hour (about 60 tries in all); `None` once past the day.
pub fn unserved_retry_at(now_ms: u64, newest_ms: u64) -> Option<u64> {
    let age = now_ms.saturating_sub(newest_ms);
    (age <= UNSERVED_GIVE_UP_MS).then(|| now_ms + (age / 8).clamp(60_000, 3_600_000))
}

impl StorageSnapshot {
    /// When it holds transactions (or tombstones) checked against a chain id other than
    /// `serving`, the object's chain: why it cannot be used ([`ReadError::OtherChain`]). A
    /// snapshot without a chain id (nothing stored, or rows of a release before it was kept)
    /// is this chain's as far as the id tells (the genesis check still applies).
    pub fn of_other_chain(&self, serving: Option<u64>) -> Option<ReadError> {
        let (serving, stored) = (serving?, self.chain_id?);
        let holds = !self.rows.is_empty() || !self.tombstones.is_empty();
        (holds && stored != serving).then(|| {
            ReadError::OtherChain(OtherChain {
                stored,
                serving,
                rows: self.rows.iter().map(|r| (r.hash, r.nonce)).collect(),
                newest_ms: self.rows.iter().map(|r| r.at_ms).max().unwrap_or(0),
            })
        })
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Unreadable(e) => write!(f, "the sender's storage could not be read ({e})"),
            ReadError::Newer { found } => write!(
                f,
                "the sender's storage has schema {found}, newer than this release's {SCHEMA_VERSION}: left untouched"
            ),
            ReadError::OtherChain(other) => write!(
                f,
                "the sender's storage holds {} transactions of chain {}, and this object now serves chain {} (CHAIN_ID moved): left untouched, never sent on chain {}",
                other.rows.len(),
                other.stored,
                other.serving,
                other.serving
            ),
        }
    }
}

/// The object's storage as [`Store::read`] finds it, what an earlier instance stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageSnapshot {
    /// The genesis hash of the chain the transactions belong to.
    pub chain: Option<String>,
    /// The chain id the transactions were checked against (meta `chain_id`; rows of earlier
    /// releases have none: [`Store::chain_id_of_rows`]).
    pub chain_id: Option<u64>,
    /// The sender (lowercase 0x address).
    pub sender: Option<String>,
    /// The stored transactions' rows, without their bytes, oldest first.
    pub rows: Vec<RowHeader>,
    /// The cancels' tombstones ([`crate::ordering::tombstone`]).
    pub tombstones: Vec<Tombstone>,
}

/// Which table a row is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// Schema 3's one table, `meta`.
    Rows,
    /// Schema 2's `sends`.
    Sends,
    /// Schema 1's `txs`.
    Txs,
}

/// The stored form the storage is in, which the next writes follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Schema 3: one table (a fresh storage, or one this release made).
    One,
    /// Schema 2's tables (and schema 1's rows), as an earlier release left them: written in that
    /// form until the storage is vacated or wiped.
    Tables,
}

/// What schema 3 keeps in each row beside the transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct RowMeta {
    chain: Option<String>,
    sender: Option<String>,
    chain_id: Option<u64>,
}

/// A stored transaction read back: the transaction, or why its row is not a send of its hash.
pub type Loaded = Result<Rc<SignedTx>, (TxHash, RowError)>;

/// A sender's storage. See the module documentation.
pub struct Store<S: Sql> {
    sql: S,
    /// Every row's hash in the tables (as read, and written since), with its table.
    rows: RefCell<HashMap<TxHash, Table>>,
    /// Rows whose transaction's nonce is used in a block: the next stored transaction
    /// overwrites one of them.
    released: RefCell<Vec<TxHash>>,
    /// The form the storage is in.
    form: Cell<Form>,
    /// Schema 2: whether `meta` has its `schema` (read, or written in this instance's life).
    schema_written: Cell<bool>,
    /// Schema 3: the chain, sender and chain id the next rows carry (and the rows written
    /// since they were last given carry).
    meta: RefCell<RowMeta>,
    /// Rows written since the instance started.
    written: Cell<u64>,
}

const SEND_COLUMNS: &str = "hash, nonce, raw, method, at_ms";
const ROW_COLUMNS: &str = "hash, nonce, raw, method, at_ms, chain, sender, chain_id, schema, resent, since_block, public, vouched";

impl<S: Sql> Store<S> {
    /// The object's tables over `sql`; nothing is read or made here.
    pub fn open(sql: S) -> Self {
        Store {
            sql,
            rows: RefCell::new(HashMap::new()),
            released: RefCell::new(Vec::new()),
            form: Cell::new(Form::One),
            schema_written: Cell::new(false),
            meta: RefCell::new(RowMeta::default()),
            written: Cell::new(0),
        }
    }

    /// The form the storage is in (as read, or made since).
    pub fn form(&self) -> Form {
        self.form.get()
    }

    /// The SQL it runs on.
    pub fn sql(&self) -> &S {
        &self.sql
    }

    /// How many rows its statements wrote since the instance started.
    pub fn rows_written(&self) -> u64 {
        self.written.get()
    }

    /// How many rows the tables hold (live and released).
    pub fn row_count(&self) -> usize {
        self.rows.borrow().len()
    }

    /// How many of them are released (waiting to be overwritten).
    pub fn released_count(&self) -> usize {
        self.released.borrow().len()
    }

    fn run(&self, sql: &str, bindings: Vec<SqlValue>) -> Result<SqlRows, String> {
        let rows = self.sql.exec(sql, bindings)?;
        self.written.set(self.written.get() + rows.written);
        Ok(rows)
    }

    /// Whether `message` says the table is not there (never made, or deleted with the storage).
    fn missing(message: &str) -> bool {
        message.contains("no such table")
    }

    /// A read, tried again once when it fails for another reason than a missing table (which
    /// reads as no rows).
    fn select(&self, op: &'static str, sql: &str) -> Result<Vec<Vec<SqlValue>>, StorageError> {
        let mut last = String::new();
        for _ in 0..2 {
            match self.run(sql, Vec::new()) {
                Ok(rows) => return Ok(rows.rows),
                Err(e) if Self::missing(&e) => return Ok(Vec::new()),
                Err(e) => last = e,
            }
        }
        Err(StorageError::of(op, last))
    }

    /// Whether `message` says the table has no such column: a `meta` of the other form.
    fn other_form(message: &str) -> bool {
        message.contains("no such column")
    }

    /// What is stored: nothing where nothing was ever written (or the tables went with the
    /// storage).
    ///
    /// # Errors
    /// [`ReadError::Unreadable`] when a read fails twice, [`ReadError::Newer`] when a `schema` is
    /// not one this code knows. Nothing is written either way.
    pub fn read(&self) -> Result<StorageSnapshot, ReadError> {
        self.rows.borrow_mut().clear();
        self.released.borrow_mut().clear();
        let select = "SELECT hash, nonce, at_ms, method, chain, sender, chain_id, schema, resent, since_block, public, vouched FROM meta";
        let mut last = String::new();
        for _ in 0..2 {
            match self.run(select, Vec::new()) {
                Ok(rows) => return self.read_rows(rows.rows),
                // No `meta`: nothing stored, or schema 1's rows alone.
                Err(e) if Self::missing(&e) => {
                    let snapshot = self.read_tables()?;
                    if snapshot == StorageSnapshot::default() {
                        self.form.set(Form::One);
                    }
                    return Ok(snapshot);
                }
                Err(e) if Self::other_form(&e) => return self.read_tables(),
                Err(e) => last = e,
            }
        }
        Err(ReadError::Unreadable(StorageError::of("read", last)))
    }

    /// Schema 3's rows read back (see [`Store::read`]).
    fn read_rows(&self, rows: Vec<Vec<SqlValue>>) -> Result<StorageSnapshot, ReadError> {
        self.form.set(Form::One);
        let mut meta = RowMeta::default();
        let mut headers = Vec::with_capacity(rows.len());
        let mut tombstones = Vec::new();
        for row in rows {
            let schema = row.get(7).and_then(SqlValue::number);
            let buried = schema == Some(u64::from(TOMBSTONE_SCHEMA))
                && row.get(3).and_then(SqlValue::text) == Some(TOMBSTONE_METHOD);
            if !buried && schema.is_none_or(|v| v > u64::from(SCHEMA_VERSION)) {
                let found = match row.get(7) {
                    Some(SqlValue::Integer(n)) => n.to_string(),
                    Some(SqlValue::Text(t)) => t.clone(),
                    other => format!("{other:?}"),
                };
                return Err(ReadError::Newer { found });
            }
            let text = |i: usize| row.get(i).and_then(SqlValue::text).map(str::to_string);
            meta.chain = meta.chain.or_else(|| text(4));
            meta.sender = meta.sender.or_else(|| text(5));
            meta.chain_id = meta
                .chain_id
                .or_else(|| row.get(6).and_then(SqlValue::number));
            if let (true, Some(header)) = (buried, Self::header(&row)) {
                tombstones.push(Tombstone {
                    nonce: header.nonce,
                    hash: header.hash,
                });
            } else if let Some(mut header) = Self::header(&row) {
                let number = |i: usize| row.get(i).and_then(SqlValue::number);
                header.progress = RowProgress {
                    resent: number(8).map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
                    since_block: number(9),
                    public: number(10).is_some_and(|n| n != 0),
                    // Bit 0: vouched; bits 1-8: the route that took it; bit 9: the route said
                    // its sender cancelled it (a release before them reads any of it as
                    // vouched, which a route's taking it means too).
                    vouched: number(11).is_some_and(|n| n & 1 != 0),
                    taken_by: TakenBy::from_bits(number(11).map_or(0, |n| (n >> 1) as i64)),
                    route_cancelled: number(11).is_some_and(|n| n & (1 << 9) != 0),
                };
                headers.push(header);
            }
        }
        headers.sort_by_key(|header| header.at_ms);
        let hashes = headers.iter().map(|h| h.hash);
        let buried = tombstones.iter().map(|t| t.hash);
        *self.rows.borrow_mut() = hashes.chain(buried).map(|h| (h, Table::Rows)).collect();
        *self.meta.borrow_mut() = meta.clone();
        Ok(StorageSnapshot {
            chain: meta.chain,
            chain_id: meta.chain_id,
            sender: meta.sender,
            rows: headers,
            tombstones,
        })
    }

    /// A row's header from its first four columns (`hash`, `nonce`, `at_ms`, `method`); an
    /// earlier release's rows hold no terms of a private send.
    fn header(row: &[SqlValue]) -> Option<RowHeader> {
        let terms = row
            .get(3)
            .and_then(|method| RowMethod::read(method.text()?).ok())
            .map(|method| method.terms())
            .unwrap_or_default();
        Some(RowHeader {
            hash: hex::decode_array(row.first()?.text()?)?,
            nonce: row.get(1)?.number()?,
            at_ms: row.get(2)?.number()?,
            terms,
            progress: RowProgress::default(),
        })
    }

    /// Schema 2's (and 1's) tables read back (see [`Store::read`]).
    fn read_tables(&self) -> Result<StorageSnapshot, ReadError> {
        self.form.set(Form::Tables);
        let unreadable = ReadError::Unreadable;
        let mut meta: HashMap<String, String> = self
            .select("read_meta", "SELECT key, value FROM meta")
            .map_err(unreadable)?
            .into_iter()
            .filter_map(|row| {
                let key = row.first()?.text()?.to_string();
                Some((key, row.get(1)?.text()?.to_string()))
            })
            .collect();
        match meta.remove("schema") {
            Some(found) if found.parse::<u32>().is_ok_and(|v| v <= KEY_VALUE_SCHEMA) => self
                .schema_written
                .set(found == KEY_VALUE_SCHEMA.to_string()),
            Some(found) => return Err(ReadError::Newer { found }),
            None => self.schema_written.set(false),
        }
        let mut headers: Vec<(RowHeader, Table)> = Vec::new();
        for (table, select) in [
            (Table::Sends, "SELECT hash, nonce, at_ms, method FROM sends"),
            (Table::Txs, "SELECT hash, nonce, at_ms, NULL FROM txs"),
        ] {
            let rows = self.select("read_rows", select).map_err(unreadable)?;
            headers.extend(
                rows.into_iter()
                    .filter_map(|row| Some((Self::header(&row)?, table))),
            );
        }
        headers.sort_by_key(|(header, _)| header.at_ms);
        *self.rows.borrow_mut() = headers.iter().map(|(h, table)| (h.hash, *table)).collect();
        Ok(StorageSnapshot {
            chain: meta.remove("chain"),
            chain_id: meta.remove("chain_id").and_then(|id| id.parse().ok()),
            sender: meta.remove("sender"),
            rows: headers.into_iter().map(|(header, _)| header).collect(),
            tombstones: Vec::new(),
        })
    }

    fn create(&self) -> Result<(), String> {
        match self.form.get() {
            Form::One => {
                self.run(
                    "CREATE TABLE IF NOT EXISTS meta (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, raw BLOB NOT NULL, method TEXT NOT NULL, at_ms INTEGER NOT NULL, chain TEXT, sender TEXT, chain_id INTEGER, schema INTEGER NOT NULL, resent INTEGER NOT NULL DEFAULT 0, since_block INTEGER, public INTEGER NOT NULL DEFAULT 0, vouched INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
                    Vec::new(),
                )?;
            }
            Form::Tables => {
                self.run(
                    "CREATE TABLE IF NOT EXISTS sends (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, raw BLOB NOT NULL, method TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID",
                    Vec::new(),
                )?;
                self.run(
                    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
                    Vec::new(),
                )?;
            }
        }
        Ok(())
    }

    /// Runs one write. The tables are made when the write finds them missing (never made yet,
    /// or deleted with the storage), and the write is run once more; in schema 2's form, the
    /// first write of the storage's life also writes its `schema`.
    fn write(
        &self,
        op: &'static str,
        sql: &str,
        bindings: Vec<SqlValue>,
    ) -> Result<u64, StorageError> {
        let fail = |e: String| StorageError::of(op, e);
        if self.form.get() == Form::Tables && !self.schema_written.get() {
            let schema = vec!["schema".into(), KEY_VALUE_SCHEMA.to_string().into()];
            let meta = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)";
            match self.run(meta, schema.clone()) {
                Ok(_) => {}
                Err(e) if Self::missing(&e) => {
                    self.create().map_err(fail)?;
                    self.run(meta, schema).map_err(fail)?;
                }
                Err(e) => return Err(fail(e)),
            }
            self.schema_written.set(true);
        }
        match self.run(sql, bindings.clone()) {
            Ok(rows) => Ok(rows.written),
            Err(e) if Self::missing(&e) => {
                self.create().map_err(fail)?;
                self.run(sql, bindings)
                    .map(|rows| rows.written)
                    .map_err(fail)
            }
            Err(e) => Err(fail(e)),
        }
    }

    /// Stores a holder's transaction before its first send: its raw bytes (a BLOB) and its send
    /// method (in schema 3 with the chain, the sender and the chain id), over a released row when
    /// there is one (one written row).
    ///
    /// # Errors
    /// The platform's refusal: of the row itself (too big: the machine refuses the transaction
    /// unsent), or of the storage (a newer instance took over).
    pub fn store(&self, row: &Row) -> Result<(), StorageError> {
        let hash = row.tx.hash;
        let form = self.form.get();
        let (table, columns, marks) = match form {
            Form::One => (
                "meta",
                ROW_COLUMNS,
                "?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, 0, 0",
            ),
            Form::Tables => ("sends", SEND_COLUMNS, "?, ?, ?, ?, ?"),
        };
        let values = |key: Option<TxHash>| {
            let mut values = vec![
                hex::encode(&hash).into(),
                SqlValue::Integer(row.tx.nonce as i64),
                SqlValue::Blob(row.tx.raw.clone()),
                row.tx.row_method().into(),
                SqlValue::Integer(row.at_ms as i64),
            ];
            if form == Form::One {
                let meta = self.meta.borrow();
                let text = |v: &Option<String>| v.clone().map_or(SqlValue::Null, SqlValue::Text);
                values.push(text(&meta.chain));
                values.push(text(&meta.sender));
                values.push(
                    meta.chain_id
                        .map_or(SqlValue::Null, |id| SqlValue::Integer(id as i64)),
                );
                values.push(SqlValue::Integer(i64::from(SCHEMA_VERSION)));
            }
            values.extend(key.map(|key| SqlValue::from(hex::encode(&key))));
            values
        };
        let insert = format!("INSERT OR REPLACE INTO {table} ({columns}) VALUES ({marks})");
        let present = self.rows.borrow().get(&hash).copied();
        self.released.borrow_mut().retain(|h| *h != hash);
        let reuse = match present {
            Some(_) => None,
            None => self.released.borrow_mut().pop(),
        };
        let written = match reuse {
            Some(old) => {
                let sql = format!("UPDATE {table} SET ({columns}) = ({marks}) WHERE hash = ?");
                let written = self.write("store", &sql, values(Some(old)));
                if written.is_ok() {
                    self.rows.borrow_mut().remove(&old);
                }
                written
            }
            None => self.write("store", &insert, values(None)),
        };
        match written {
            // A released row that was not there any more: stored anew.
            Ok(0) => {
                self.write("store", &insert, values(None))?;
            }
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        let table = match form {
            Form::One => Table::Rows,
            Form::Tables => Table::Sends,
        };
        self.rows.borrow_mut().insert(hash, table);
        Ok(())
    }

    /// Deletes these transactions' rows (a released one is left to be overwritten).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn forget(&self, hashes: &[TxHash]) -> Result<(), StorageError> {
        for hash in hashes {
            if self.released.borrow().contains(hash) {
                continue;
            }
            let Some(table) = self.rows.borrow().get(hash).copied() else {
                continue;
            };
            let sql = match table {
                Table::Rows => "DELETE FROM meta WHERE hash = ?",
                Table::Sends => "DELETE FROM sends WHERE hash = ?",
                Table::Txs => "DELETE FROM txs WHERE hash = ?",
            };
            self.write("forget", sql, vec![hex::encode(hash).into()])?;
            self.rows.borrow_mut().remove(hash);
        }
        Ok(())
    }

    /// These transactions' nonces are used in a block: their rows are no longer needed, and the
    /// next transactions stored overwrite them (an earlier release's row is deleted).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn release(&self, hashes: &[TxHash]) -> Result<(), StorageError> {
        for hash in hashes {
            let table = self.rows.borrow().get(hash).copied();
            match table {
                Some(Table::Rows | Table::Sends) if !self.released.borrow().contains(hash) => {
                    self.released.borrow_mut().push(*hash)
                }
                Some(Table::Txs) => self.forget(&[*hash])?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Deletes every row and what the rows belong to (the state of another chain): schema 3's
    /// rows, or schema 2's tables (dropped, so that the next write makes schema 3's).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn wipe(&self) -> Result<(), StorageError> {
        let statements: &[&str] = match self.form.get() {
            Form::One => &["DELETE FROM meta"],
            Form::Tables => &[
                "DROP TABLE IF EXISTS sends",
                "DROP TABLE IF EXISTS txs",
                "DROP TABLE IF EXISTS meta",
            ],
        };
        for statement in statements {
            match self.run(statement, Vec::new()) {
                Ok(_) => {}
                Err(e) if Self::missing(&e) => {}
                Err(e) => return Err(StorageError::of("wipe", e)),
            }
        }
        self.vacated();
        Ok(())
    }

    /// The platform deleted the whole storage (`deleteAll`): nothing is stored, and the next
    /// write makes schema 3's table.
    pub fn vacated(&self) {
        self.rows.borrow_mut().clear();
        self.released.borrow_mut().clear();
        self.schema_written.set(false);
        self.form.set(Form::One);
        *self.meta.borrow_mut() = RowMeta::default();
    }

    /// Keeps a cancel's tombstone (schema 3's form): the transaction's row becomes it, its bytes
    /// gone (one row written), or a row is written for it ([`TOMBSTONE_SCHEMA`]). In schema 2's
    /// form, which has no place for one, the transaction's row is deleted and the tombstone
    /// lasts the object's memory (as the cancel did before).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn bury(&self, tombstone: &Tombstone, at_ms: u64) -> Result<(), StorageError> {
        let hash = tombstone.hash;
        self.released.borrow_mut().retain(|h| *h != hash);
        if self.form.get() == Form::Tables {
            return self.forget(&[hash]);
        }
        let meta = self.meta.borrow().clone();
        let text = |v: Option<String>| v.map_or(SqlValue::Null, SqlValue::Text);
        let values = vec![
            hex::encode(&hash).into(),
            SqlValue::Integer(tombstone.nonce as i64),
            SqlValue::Blob(Vec::new()),
            TOMBSTONE_METHOD.into(),
            SqlValue::Integer(at_ms as i64),
            text(meta.chain),
            text(meta.sender),
            meta.chain_id
                .map_or(SqlValue::Null, |id| SqlValue::Integer(id as i64)),
            SqlValue::Integer(i64::from(TOMBSTONE_SCHEMA)),
        ];
        let present = self.rows.borrow().get(&hash) == Some(&Table::Rows);
        let update = "UPDATE meta SET (raw, method, schema) = (x'', ?, ?) WHERE hash = ?";
        let kept = [values[3].clone(), values[8].clone(), values[0].clone()];
        if !present || self.write("bury", update, kept.to_vec())? == 0 {
            let insert = format!(
                "INSERT OR REPLACE INTO meta ({ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, 0, 0)"
            );
            self.write("bury", &insert, values)?;
        }
        self.rows.borrow_mut().insert(hash, Table::Rows);
        Ok(())
    }

    /// Keeps what tracking learned of `hash` in its row (schema 3; an older form keeps it in
    /// memory only, and a row not there is not made): one row written.
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn progress(&self, hash: &TxHash, progress: RowProgress) -> Result<(), StorageError> {
        if self.rows.borrow().get(hash) != Some(&Table::Rows) {
            return Ok(());
        }
        let values = vec![
            SqlValue::Integer(i64::from(progress.resent)),
            progress
                .since_block
                .map_or(SqlValue::Null, |n| SqlValue::Integer(n as i64)),
            SqlValue::Integer(i64::from(progress.public)),
            SqlValue::Integer(
                i64::from(progress.vouched)
                    | (progress.taken_by.to_bits() << 1)
                    | (i64::from(progress.route_cancelled) << 9),
            ),
            hex::encode(hash).into(),
        ];
        let sql =
            "UPDATE meta SET (resent, since_block, public, vouched) = (?, ?, ?, ?) WHERE hash = ?";
        self.write("progress", sql, values).map(|_| ())
    }

    /// Schema 3: the rows already written that do not carry `value` in `column` are given it
    /// (none, when it was known before the first row: the usual case).
    fn update_rows(
        &self,
        op: &'static str,
        column: &str,
        value: SqlValue,
    ) -> Result<(), StorageError> {
        if self.rows.borrow().values().all(|t| *t != Table::Rows) {
            return Ok(());
        }
        let sql = format!("UPDATE meta SET {column} = ? WHERE {column} IS NOT ?");
        self.write(op, &sql, vec![value.clone(), value]).map(|_| ())
    }

    /// Stores the chain id the stored transactions were checked against (schema 3: in each
    /// row, the next ones and those already written; schema 2: meta `chain_id`).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn store_chain_id(&self, chain_id: u64) -> Result<(), StorageError> {
        match self.form.get() {
            Form::One => {
                self.meta.borrow_mut().chain_id = Some(chain_id);
                self.update_rows("chain_id", "chain_id", SqlValue::Integer(chain_id as i64))
            }
            Form::Tables => self
                .write(
                    "chain_id",
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                    vec!["chain_id".into(), chain_id.to_string().into()],
                )
                .map(|_| ()),
        }
    }

    /// Stores the chain's genesis hash and the sender (schema 3: in each row, the next ones and
    /// those already written; schema 2: in meta).
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn store_chain(&self, genesis: &str, sender: &str) -> Result<(), StorageError> {
        match self.form.get() {
            Form::One => {
                {
                    let mut meta = self.meta.borrow_mut();
                    meta.chain = Some(genesis.to_string());
                    meta.sender = Some(sender.to_string());
                }
                self.update_rows("chain", "chain", genesis.into())?;
                self.update_rows("chain", "sender", sender.into())
            }
            Form::Tables => {
                let sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)";
                self.write("chain", sql, vec!["chain".into(), genesis.into()])?;
                self.write("chain", sql, vec!["sender".into(), sender.into()])
                    .map(|_| ())
            }
        }
    }

    /// The chain id of the first stored transaction that has one, as an earlier release stored
    /// it without meta `chain_id` (`None`: none stored, only unprotected legacy ones, or
    /// unreadable).
    pub fn chain_id_of_rows(&self, rows: &[RowHeader]) -> Option<u64> {
        rows.iter()
            .find_map(|row| self.load_one(&row.hash).ok()??.ok()?.chain_id)
    }

    /// The stored transactions of `hashes`, read back ([`SignedTx::from_row`], or for a row of
    /// schema 1 as the relay reads any request, [`SignedTx::from_request_text`]): missing ones
    /// left out, and one that is not a send of its own hash given with why.
    ///
    /// # Errors
    /// The storage can no longer be used.
    pub fn load(&self, hashes: &[TxHash]) -> Result<Vec<Loaded>, StorageError> {
        let mut out = Vec::with_capacity(hashes.len());
        for hash in hashes {
            match self.load_one(hash)? {
                Some(Ok(tx)) => out.push(Ok(Rc::new(tx))),
                Some(Err(why)) => out.push(Err((*hash, why))),
                None => {}
            }
        }
        Ok(out)
    }

    /// The stored transaction `hash`: in schema 3's table, or in schema 2's `sends` and else
    /// schema 1's `txs`; `None` when none has it (never written, or deleted since), or why its
    /// row is not a send of it.
    fn load_one(&self, hash: &TxHash) -> Result<Option<Result<SignedTx, RowError>>, StorageError> {
        let key = || vec![SqlValue::from(hex::encode(hash))];
        let select = match self.form.get() {
            Form::One => "SELECT raw, method FROM meta WHERE hash = ?",
            Form::Tables => "SELECT raw, method FROM sends WHERE hash = ?",
        };
        let send = match self.run(select, key()) {
            Ok(rows) => rows.rows.into_iter().next(),
            Err(e) if Self::missing(&e) => None,
            Err(e) => return Err(StorageError::of("load_send", e)),
        };
        if let Some(values) = send {
            let mut values = values.into_iter();
            return Ok(Some(match (values.next(), values.next()) {
                (Some(SqlValue::Blob(raw)), Some(SqlValue::Text(method))) => {
                    SignedTx::from_row(raw, &method, hash)
                }
                _ => Err(RowError::NotARequest),
            }));
        }
        if self.form.get() == Form::One {
            return Ok(None);
        }
        match self.run("SELECT request FROM txs WHERE hash = ?", key()) {
            Ok(rows) => Ok(rows
                .rows
                .first()
                .and_then(|row| row.first()?.text().map(str::to_string))
                .map(|request| SignedTx::from_request_text(&request, hash))),
            Err(e) if Self::missing(&e) => Ok(None),
            Err(e) => Err(StorageError::of("load_request", e)),
        }
    }
}

#[cfg(test)]
mod tests;
