//! The object's SQLite storage: the stored transactions (table `txs`) and what they belong to
//! (table `meta`). Every call is synchronous SQL; the platform's output gate holds any later send
//! until the writes are on disk. An error means the instance can no longer use its storage.

use crate::hex;
use crate::log;
use crate::ordering::sender::{Loaded, Row};
use crate::transaction::TxHash;
use serde::Deserialize;
use std::collections::HashMap;
use worker::{console_log, SqlStorage, SqlStorageValue};

#[derive(Deserialize)]
struct StoredRow {
    hash: String,
    nonce: f64,
    at_ms: f64,
}

#[derive(Deserialize)]
struct StoredRequest {
    hash: String,
    nonce: f64,
    request: String,
}

#[derive(Deserialize)]
struct MetaRow {
    key: String,
    value: String,
}

/// Logs a storage call that failed.
pub fn storage_error(op: &str, e: &worker::Error) {
    console_log!(
        "{}",
        log::line(
            "storage_error",
            &[("op", op.into()), ("error", e.to_string().into())]
        )
    );
}

/// What an earlier instance stored: the chain's genesis hash, the sender, and the transactions
/// (`hash`, `nonce`, stored at Unix ms), oldest first.
pub struct Stored {
    /// The genesis hash of the chain the transactions belong to.
    pub chain: Option<String>,
    /// The sender (lowercase 0x address).
    pub sender: Option<String>,
    /// The stored transactions.
    pub rows: Vec<(TxHash, u64, u64)>,
}

/// The object's tables.
pub struct Store {
    sql: SqlStorage,
}

impl Store {
    /// The object's tables (`txs`: `hash` TEXT primary key, `nonce` INTEGER, `request` TEXT,
    /// `at_ms` INTEGER; `meta`: `key`, `value`; both WITHOUT ROWID, so a write is one billed
    /// row). Nothing is created here: the first write makes them ([`Store::exec`]), so an object
    /// that is only read (a pending count, a transaction's status) leaves no storage behind.
    pub fn open(sql: SqlStorage) -> Self {
        Store { sql }
    }

    /// Whether `e` says the tables are not there (never made, or deleted with the storage).
    fn missing(e: &worker::Error) -> bool {
        e.to_string().contains("no such table")
    }

    fn create(&self) {
        let sql = &self.sql;
        let created = sql
            .exec(
                "CREATE TABLE IF NOT EXISTS txs (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, request TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID",
                None,
            )
            .and_then(|_| {
                sql.exec(
                    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
                    None,
                )
            })
            // The accepted hashes of releases before `txs`: answered by the upstream now.
            .and_then(|_| sql.exec("DROP TABLE IF EXISTS accepted", None));
        if let Err(e) = created {
            storage_error("create", &e);
        }
    }

    /// What is stored (nothing, where nothing was ever written or it can't be read).
    pub fn read(&self) -> Stored {
        let logged = |op: &'static str| {
            move |e: worker::Error| {
                if !Self::missing(&e) {
                    storage_error(op, &e);
                }
            }
        };
        let rows = self
            .sql
            .exec("SELECT hash, nonce, at_ms FROM txs ORDER BY at_ms", None)
            .and_then(|cursor| cursor.to_array::<StoredRow>())
            .map_err(logged("load"))
            .unwrap_or_default()
            .into_iter()
            .filter_map(|row| {
                Some((
                    hex::decode_array(&row.hash)?,
                    row.nonce as u64,
                    row.at_ms as u64,
                ))
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
        Stored {
            chain: meta.remove("chain"),
            sender: meta.remove("sender"),
            rows,
        }
    }

    /// Runs one write. The tables are made when the write finds them missing (never made yet,
    /// or deleted with `deleteAll` while the object was idle), and the write is run once more.
    fn exec(&self, op: &str, sql: &str, bindings: Vec<SqlStorageValue>) -> Result<(), ()> {
        match self.sql.exec(sql, bindings.clone()) {
            Ok(_) => Ok(()),
            Err(e) if Self::missing(&e) => {
                self.create();
                self.sql
                    .exec(sql, bindings)
                    .map(|_| ())
                    .map_err(|e| storage_error(op, &e))
            }
            Err(e) => {
                storage_error(op, &e);
                Err(())
            }
        }
    }

    /// Stores a holder's transaction before its first send.
    pub fn store(&self, row: &Row) -> Result<(), ()> {
        self.exec(
            "store",
            "INSERT OR REPLACE INTO txs (hash, nonce, request, at_ms) VALUES (?, ?, ?, ?)",
            vec![
                hex::encode(&row.hash).into(),
                (row.nonce as i64).into(),
                row.request.to_string().into(),
                (row.at_ms as i64).into(),
            ],
        )
    }

    /// Deletes these transactions.
    pub fn forget(&self, hashes: &[TxHash]) -> Result<(), ()> {
        for hash in hashes {
            self.exec(
                "forget",
                "DELETE FROM txs WHERE hash = ?",
                vec![hex::encode(hash).into()],
            )?;
        }
        Ok(())
    }

    /// Deletes everything (the state of another chain).
    pub fn wipe(&self) -> Result<(), ()> {
        self.exec("wipe", "DELETE FROM txs", Vec::new())?;
        self.exec("wipe", "DELETE FROM meta", Vec::new())
    }

    /// Stores the chain's genesis hash and the sender.
    pub fn store_chain(&self, genesis: &str, sender: &str) -> Result<(), ()> {
        let sql = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)";
        self.exec("chain", sql, vec!["chain".into(), genesis.into()])?;
        self.exec("chain", sql, vec!["sender".into(), sender.into()])
    }

    /// The stored requests of `hashes` (missing ones left out).
    pub fn load(&self, hashes: &[TxHash]) -> Result<Vec<Loaded>, ()> {
        let mut rows = Vec::with_capacity(hashes.len());
        for hash in hashes {
            let found = self
                .sql
                .exec(
                    "SELECT hash, nonce, request FROM txs WHERE hash = ?",
                    vec![SqlStorageValue::from(hex::encode(hash))],
                )
                .and_then(|cursor| cursor.to_array::<StoredRequest>());
            let found = match found {
                Ok(found) => found,
                // Never written, or deleted since: nothing stored.
                Err(e) if Self::missing(&e) => Vec::new(),
                Err(e) => {
                    storage_error("load_request", &e);
                    return Err(());
                }
            };
            rows.extend(found.into_iter().filter_map(|row| {
                Some(Loaded {
                    hash: hex::decode_array(&row.hash)?,
                    nonce: row.nonce as u64,
                    request: row.request.into(),
                })
            }));
        }
        Ok(rows)
    }
}
