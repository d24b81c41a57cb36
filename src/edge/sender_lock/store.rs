//! The object's SQL for its [`Store`](crate::ordering::store::Store) (the tables, the schema
//! version and what a failed read does are the core's: [`crate::ordering::store`]): the
//! Durable Object's `ctx.storage.sql`, each statement's rows and `rowsWritten` read back, and
//! the storage errors logged.

use crate::log;
use crate::ordering::store::{Sql, SqlRows, SqlValue, StorageError};
use worker::{console_log, SqlStorage, SqlStorageValue};

/// The object's store over its SQL.
pub type Store = crate::ordering::store::Store<EdgeSql>;

/// The Durable Object's SQL (`ctx.storage.sql`).
pub struct EdgeSql {
    sql: SqlStorage,
    /// Test builds only: the next write fails, as writes fail once a newer instance took over.
    #[cfg(feature = "test-faults")]
    pub(super) fail_next: std::cell::Cell<bool>,
}

impl EdgeSql {
    /// The object's SQL.
    pub fn new(sql: SqlStorage) -> Self {
        EdgeSql {
            sql,
            #[cfg(feature = "test-faults")]
            fail_next: std::cell::Cell::new(false),
        }
    }
}

fn to_platform(value: SqlValue) -> SqlStorageValue {
    match value {
        SqlValue::Null => SqlStorageValue::Null,
        SqlValue::Integer(n) => SqlStorageValue::Integer(n),
        SqlValue::Real(n) => SqlStorageValue::Float(n),
        SqlValue::Text(text) => SqlStorageValue::String(text),
        SqlValue::Blob(bytes) => SqlStorageValue::Blob(bytes),
    }
}

fn from_platform(value: SqlStorageValue) -> SqlValue {
    match value {
        SqlStorageValue::Null => SqlValue::Null,
        SqlStorageValue::Boolean(b) => SqlValue::Integer(i64::from(b)),
        SqlStorageValue::Integer(n) => SqlValue::Integer(n),
        SqlStorageValue::Float(n) => SqlValue::Real(n),
        SqlStorageValue::String(text) => SqlValue::Text(text),
        SqlStorageValue::Blob(bytes) => SqlValue::Blob(bytes),
    }
}

/// Test builds only (`--features test-faults`): how many of the next storage reads fail,
/// whichever instance makes them (set by the `unreadable-restart` fault).
#[cfg(feature = "test-faults")]
pub static FAIL_READS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Sql for EdgeSql {
    fn exec(&self, sql: &str, bindings: Vec<SqlValue>) -> Result<SqlRows, String> {
        #[cfg(feature = "test-faults")]
        {
            use std::sync::atomic::Ordering;
            let read = sql.starts_with("SELECT");
            let failing = FAIL_READS.load(Ordering::SeqCst);
            if read && failing > 0 {
                FAIL_READS.store(failing - 1, Ordering::SeqCst);
                return Err("test fault: storage read failed: SQLITE_IOERR".into());
            }
            if !read && self.fail_next.replace(false) {
                return Err("test fault: storage-fails".into());
            }
        }
        let bindings: Vec<SqlStorageValue> = bindings.into_iter().map(to_platform).collect();
        let cursor = self.sql.exec(sql, bindings).map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        for row in cursor.raw() {
            let row = row.map_err(|e| e.to_string())?;
            rows.push(row.into_iter().map(from_platform).collect());
        }
        Ok(SqlRows {
            rows,
            written: cursor.rows_written() as u64,
        })
    }
}

/// Logs a storage error of `sender`'s object on chain `chain` (`storage_error`).
pub fn log_error(chain: Option<u64>, sender: &str, error: &StorageError) {
    console_log!("{}", error.log_line(chain, sender));
}

/// Logs a stored row of `sender`'s object on chain `chain` that is not a send of its own hash
/// (`stored_request_refused`).
pub fn log_refused(
    chain: Option<u64>,
    sender: &str,
    hash: &crate::transaction::TxHash,
    why: &impl std::fmt::Display,
) {
    console_log!(
        "{}",
        log::line(
            "stored_request_refused",
            &[
                ("sender", sender.into()),
                ("chain", chain.into()),
                ("tx_hash", crate::hex::encode(hash).into()),
                ("error", why.to_string().into()),
            ]
        )
    );
}
