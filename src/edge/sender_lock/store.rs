//! The object's SQLite storage: the stored transactions (table `sends`: each one's raw bytes as a
//! BLOB and its send method; rows of earlier releases in table `txs`, their request text, are
//! still read, resent and deleted) and what they belong to (table `meta`). Every call is
//! synchronous SQL; the platform's output gate holds any later send until the writes are on disk.
//! An error ([`StorageError`]) means the instance can no longer use its storage.

use crate::hex;
use crate::log;
use crate::ordering::row::RowError;
use crate::ordering::sender::{Row, RowHeader};
use crate::ordering::tx::SignedTx;
use crate::transaction::TxHash;
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use worker::{console_log, SqlStorage, SqlStorageValue};

/// A [`RowHeader`]'s columns as SQL returns them (numbers as f64).
#[derive(Deserialize)]
struct RowHeaderColumns {
    hash: String,
    nonce: f64,
    at_ms: f64,
}

/// A row of `sends`, read back: the raw bytes and the row method ([`SignedTx::row_method`]).
fn sends_row(values: Vec<SqlStorageValue>) -> Option<(Vec<u8>, String)> {
    let mut values = values.into_iter();
    match (values.next(), values.next()) {
        (Some(SqlStorageValue::Blob(raw)), Some(SqlStorageValue::String(method))) => {
            Some((raw, method))
        }
        _ => None,
    }
}

#[derive(Deserialize)]
struct RowRequest {
    request: String,
}

#[derive(Deserialize)]
struct MetaRow {
    key: String,
    value: String,
}

/// A storage call that failed: which one, and the runtime's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageError {
    /// The call (`store`, `forget`, `wipe`, `chain`, `load_request`, `vacate`, `alarm`...).
    pub op: &'static str,
    /// The runtime's message.
    pub message: String,
}

impl StorageError {
    fn of(op: &'static str, e: &worker::Error) -> Self {
        StorageError {
            op,
            message: e.to_string(),
        }
    }

    /// Logs it (`storage_error`).
    pub fn log(&self) {
        console_log!(
            "{}",
            log::line(
                "storage_error",
                &[
                    ("op", self.op.into()),
                    ("error", self.message.clone().into())
                ]
            )
        );
    }
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

/// The object's storage as [`Store::read`] finds it, what an earlier instance stored: the chain's
/// genesis hash and id, the sender, and the transactions' rows (without their bytes), oldest first.
pub struct StorageSnapshot {
    /// The genesis hash of the chain the transactions belong to.
    pub chain: Option<String>,
    /// The chain id the transactions were checked against (meta `chain_id`; rows of earlier
    /// releases have none: [`Store::chain_id_of_rows`]).
    pub chain_id: Option<u64>,
    /// The sender (lowercase 0x address).
    pub sender: Option<String>,
    /// The stored transactions' rows, without their bytes.
    pub rows: Vec<RowHeader>,
}

/// The object's tables.
pub struct Store {
    sql: SqlStorage,
    /// Test builds only: the next write fails, as writes fail once a newer instance took over.
    #[cfg(feature = "test-faults")]
    fail_next: std::cell::Cell<bool>,
}

impl Store {
    /// The object's tables (`sends`: `hash` TEXT primary key, `nonce` INTEGER, `raw` BLOB,
    /// `method` TEXT, `at_ms` INTEGER; `txs`, the earlier releases' form, with `request` TEXT for
    /// `raw` and `method`; `meta`: `key`, `value`; all WITHOUT ROWID, so a write is one billed
    /// row). Nothing is created here: the first write makes them ([`Store::exec`]), so an object
    /// that is only read (a pending count, a transaction's status) leaves no storage behind.
    pub fn open(sql: SqlStorage) -> Self {
        Store {
            sql,
            #[cfg(feature = "test-faults")]
            fail_next: std::cell::Cell::new(false),
        }
    }

    /// Test builds only: the next write fails.
    #[cfg(feature = "test-faults")]
    pub fn fail_next_write(&self) {
        self.fail_next.set(true);
    }

    /// Whether `e` says the tables are not there (never made, or deleted with the storage).
    fn missing(e: &worker::Error) -> bool {
        e.to_string().contains("no such table")
    }

    fn create(&self) -> Result<(), StorageError> {
        let sql = &self.sql;
        sql.exec(
            "CREATE TABLE IF NOT EXISTS sends (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, raw BLOB NOT NULL, method TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID",
            None,
        )
        .and_then(|_| sql.exec(
            "CREATE TABLE IF NOT EXISTS txs (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, request TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID",
            None,
        ))
        .and_then(|_| {
            sql.exec(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
                None,
            )
        })
        // The accepted hashes of releases before `txs`: answered by the upstream now.
        .and_then(|_| sql.exec("DROP TABLE IF EXISTS accepted", None))
        .map(|_| ())
        .map_err(|e| StorageError::of("create", &e))
    }

    /// What is stored (nothing, where nothing was ever written or it can't be read).
    pub fn read(&self) -> StorageSnapshot {
        let logged = |op: &'static str| {
            move |e: worker::Error| {
                if !Self::missing(&e) {
                    StorageError::of(op, &e).log();
                }
            }
        };
        let mut headers: Vec<RowHeaderColumns> = Vec::new();
        for table in ["sends", "txs"] {
            headers.extend(
                self.sql
                    .exec(&format!("SELECT hash, nonce, at_ms FROM {table}"), None)
                    .and_then(|cursor| cursor.to_array::<RowHeaderColumns>())
                    .map_err(logged("load"))
                    .unwrap_or_default(),
            );
        }
        headers.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
        let rows = headers
            .into_iter()
            .filter_map(|row| {
                Some(RowHeader {
                    hash: hex::decode_array(&row.hash)?,
                    nonce: row.nonce as u64,
                    at_ms: row.at_ms as u64,
                })
            })
            .collect();
        let mut meta: HashMap<String, String> = self
            .sql
            .exec("SELECT key, value FROM meta", None)
            .and_then(|cursor| cursor.to_array::<MetaRow>())
            .map_err(logged("load_meta"))
            .unwrap_or_default()
            .into_iter()
            .map(|row| (row.key, row.value))
            .collect();
        StorageSnapshot {
            chain: meta.remove("chain"),
            chain_id: meta.remove("chain_id").and_then(|id| id.parse().ok()),
            sender: meta.remove("sender"),
            rows,
        }
    }

    /// Runs one write. The tables are made when the write finds them missing (never made yet,
    /// or deleted with `deleteAll` while the object was idle), and the write is run once more.
    fn exec(
        &self,
        op: &'static str,
        sql: &str,
        bindings: Vec<SqlStorageValue>,
    ) -> Result<(), StorageError> {
        #[cfg(feature = "test-faults")]
        if self.fail_next.replace(false) {
            return Err(StorageError {
                op,
                message: "test fault: storage-fails".into(),
            });
        }
        match self.sql.exec(sql, bindings.clone()) {
            Ok(_) => Ok(()),
            Err(e) if Self::missing(&e) => {
                self.create()?;
                self.sql
                    .exec(sql, bindings)
                    .map(|_| ())
                    .map_err(|e| StorageError::of(op, &e))
            }
            Err(e) => Err(StorageError::of(op, &e)),
        }
    }

    /// Stores a holder's transaction before its first send: its raw bytes (a BLOB) and its send
    /// method ([`SignedTx::row_method`]).
    pub fn store(&self, row: &Row) -> Result<(), StorageError> {
        self.exec(
            "store",
            "INSERT OR REPLACE INTO sends (hash, nonce, raw, method, at_ms) VALUES (?, ?, ?, ?, ?)",
            vec![
                hex::encode(&row.tx.hash).into(),
                (row.tx.nonce as i64).into(),
                SqlStorageValue::Blob(row.tx.raw.clone()),
                row.tx.row_method().into(),
                (row.at_ms as i64).into(),
            ],
        )
    }

    /// Deletes these transactions (in either form).
    pub fn forget(&self, hashes: &[TxHash]) -> Result<(), StorageError> {
        for hash in hashes {
            for sql in [
                "DELETE FROM sends WHERE hash = ?",
                "DELETE FROM txs WHERE hash = ?",
            ] {
                self.exec("forget", sql, vec![hex::encode(hash).into()])?;
            }
        }
        Ok(())
    }

    /// Deletes everything (the state of another chain).
    pub fn wipe(&self) -> Result<(), StorageError> {
        self.exec("wipe", "DELETE FROM sends", Vec::new())?;
        self.exec("wipe", "DELETE FROM txs", Vec::new())?;
        self.exec("wipe", "DELETE FROM meta", Vec::new())
    }

    /// Stores the chain id the stored transactions were checked against (meta `chain_id`).
    pub fn store_chain_id(&self, chain_id: u64) -> Result<(), StorageError> {
        self.exec(
            "chain_id",
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            vec!["chain_id".into(), chain_id.to_string().into()],
        )
    }

    /// The chain id of the first stored transaction that has one, as an earlier release stored it
    /// without meta `chain_id` (`None`: none stored, only unprotected legacy ones, or unreadable).
    pub fn chain_id_of_rows(&self, rows: &[RowHeader]) -> Option<u64> {
        rows.iter()
            .find_map(|row| self.load_one(&row.hash).ok()??.ok()?.chain_id)
    }

    /// Stores the chain's genesis hash and the sender.
    pub fn store_chain(&self, genesis: &str, sender: &str) -> Result<(), StorageError> {
        let sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)";
        self.exec("chain", sql, vec!["chain".into(), genesis.into()])?;
        self.exec("chain", sql, vec!["sender".into(), sender.into()])
    }

    /// The stored transactions of `hashes`, read back ([`SignedTx::from_row`], or for a row of
    /// an earlier release as the relay reads any request, [`SignedTx::from_request_text`]):
    /// missing ones left out, and one that is not a send of its own hash left out and logged
    /// (`stored_request_refused`).
    pub fn load(&self, sender: &str, hashes: &[TxHash]) -> Result<Vec<Rc<SignedTx>>, StorageError> {
        let mut txs = Vec::with_capacity(hashes.len());
        for hash in hashes {
            match self.load_one(hash)? {
                Some(Ok(tx)) => txs.push(Rc::new(tx)),
                Some(Err(why)) => refused(sender, hash, &why),
                None => {}
            }
        }
        Ok(txs)
    }

    /// The stored transaction `hash`, in `sends` or else in the earlier releases' `txs`: `None`
    /// when neither has it (never written, or deleted since), or why its row is not a send of it.
    fn load_one(&self, hash: &TxHash) -> Result<Option<Result<SignedTx, RowError>>, StorageError> {
        let key = || vec![SqlStorageValue::from(hex::encode(hash))];
        let send = match self
            .sql
            .exec("SELECT raw, method FROM sends WHERE hash = ?", key())
        {
            Ok(cursor) => cursor.raw().next(),
            Err(e) if Self::missing(&e) => None,
            Err(e) => return Err(StorageError::of("load_send", &e)),
        };
        if let Some(values) = send {
            let values = values.map_err(|e| StorageError::of("load_send", &e))?;
            return Ok(Some(match sends_row(values) {
                Some((raw, method)) => SignedTx::from_row(raw, &method, hash),
                None => Err(RowError::NotARequest),
            }));
        }
        let earlier = self
            .sql
            .exec("SELECT request FROM txs WHERE hash = ?", key())
            .and_then(|cursor| cursor.to_array::<RowRequest>());
        match earlier {
            Ok(rows) => Ok(rows
                .first()
                .map(|row| SignedTx::from_request_text(&row.request, hash))),
            Err(e) if Self::missing(&e) => Ok(None),
            Err(e) => Err(StorageError::of("load_request", &e)),
        }
    }
}

/// Logs a stored row that is not a send of its own hash (`stored_request_refused`).
fn refused(sender: &str, hash: &TxHash, why: &RowError) {
    console_log!(
        "{}",
        log::line(
            "stored_request_refused",
            &[
                ("sender", sender.into()),
                ("tx_hash", hex::encode(hash).into()),
                ("error", why.to_string().into()),
            ]
        )
    );
}
