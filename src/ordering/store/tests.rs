//! The store on a real SQLite (rusqlite, bundled), with the faults a read can meet; and a
//! sender's machine driven over it: rows written per transaction, a restart on what it wrote.

use super::*;
use crate::jsonrpc::Answer;
use crate::metrics::Metric;
use crate::ordering::answer::AnswerClass;
use crate::ordering::row::RowProgress;
use crate::ordering::sender::{
    Arrival, Effects, Found, LookupId, Query, Seen, Sender, Sent, SessionKey, Settings, Ticket,
    Unstorable,
};
use crate::ordering::tx::SendMethod;
use rusqlite::types::{Value, ValueRef};
use std::collections::BTreeMap;

/// A real SQLite database in memory, shared by the instances a test starts on it, that can fail
/// its next reads or writes, and records every statement it ran.
#[derive(Clone)]
struct Sqlite {
    conn: Rc<rusqlite::Connection>,
    fail_reads: Rc<Cell<u32>>,
    fail_writes: Rc<Cell<u32>>,
    ran: Rc<RefCell<Vec<String>>>,
}

impl Sqlite {
    fn new() -> Self {
        Sqlite {
            conn: Rc::new(rusqlite::Connection::open_in_memory().unwrap()),
            fail_reads: Rc::default(),
            fail_writes: Rc::default(),
            ran: Rc::default(),
        }
    }

    /// The statements run that write (anything but a SELECT).
    fn writes(&self) -> Vec<String> {
        self.ran
            .borrow()
            .iter()
            .filter(|sql| !sql.starts_with("SELECT"))
            .cloned()
            .collect()
    }

    fn count(&self, sql: &str) -> i64 {
        self.conn.query_row(sql, [], |row| row.get(0)).unwrap()
    }
}

impl Sql for Sqlite {
    /// Rows written as SQLite counts its changes (workerd also counts a table it makes as two
    /// rows; `make bench-e2e` reads workerd's own count).
    fn exec(&self, sql: &str, bindings: Vec<SqlValue>) -> Result<SqlRows, String> {
        let read = sql.starts_with("SELECT");
        let fault = if read {
            &self.fail_reads
        } else {
            &self.fail_writes
        };
        if fault.get() > 0 {
            fault.set(fault.get() - 1);
            return Err("disk I/O error: SQLITE_IOERR".into());
        }
        self.ran.borrow_mut().push(sql.to_string());
        let before = self.conn.total_changes();
        let params: Vec<Value> = bindings
            .into_iter()
            .map(|v| match v {
                SqlValue::Null => Value::Null,
                SqlValue::Integer(n) => Value::Integer(n),
                SqlValue::Real(n) => Value::Real(n),
                SqlValue::Text(t) => Value::Text(t),
                SqlValue::Blob(b) => Value::Blob(b),
            })
            .collect();
        let mut statement = self.conn.prepare(sql).map_err(|e| e.to_string())?;
        let columns = statement.column_count();
        let mut rows = Vec::new();
        let mut cursor = statement
            .query(rusqlite::params_from_iter(params))
            .map_err(|e| e.to_string())?;
        while let Some(row) = cursor.next().map_err(|e| e.to_string())? {
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(match row.get_ref(i).map_err(|e| e.to_string())? {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(n) => SqlValue::Integer(n),
                    ValueRef::Real(n) => SqlValue::Real(n),
                    ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into()),
                    ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                });
            }
            rows.push(values);
        }
        drop(cursor);
        Ok(SqlRows {
            rows,
            written: self.conn.total_changes() - before,
        })
    }
}

fn h(nonce: u64, variant: u8) -> TxHash {
    let mut hash = [0u8; 32];
    hash[..8].copy_from_slice(&nonce.to_be_bytes());
    hash[8] = variant;
    hash
}

fn tx(nonce: u64) -> Rc<SignedTx> {
    Rc::new(SignedTx {
        hash: h(nonce, 0),
        nonce,
        chain_id: Some(1),
        raw: format!("raw {nonce}").into_bytes(),
        method: SendMethod::Plain,
        public_after_blocks: None,
        self_cancel: false,
    })
}

fn row(nonce: u64) -> Row {
    Row {
        tx: tx(nonce),
        at_ms: 1_000 + nonce,
    }
}

/// The header of the stored transaction with `nonce` in `snapshot`.
fn header_of(snapshot: &StorageSnapshot, nonce: u64) -> &RowHeader {
    snapshot.rows.iter().find(|r| r.nonce == nonce).unwrap()
}

/// What an earlier instance left: three stored transactions, with their chain, sender and chain
/// id (schema 3).
fn stored() -> Sqlite {
    let sql = Sqlite::new();
    let store = Store::open(sql.clone());
    store.read().unwrap();
    store.store_chain("0xgenesis", "0xabc").unwrap();
    store.store_chain_id(1).unwrap();
    for n in 0..3 {
        store.store(&row(n)).unwrap();
    }
    sql
}

/// What a release of schema 2 left: three stored transactions in `sends`, the key-value meta.
fn stored_v2() -> Sqlite {
    let sql = Sqlite::new();
    sql.conn
        .execute_batch(
            "CREATE TABLE sends (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, raw BLOB NOT NULL, method TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID;
             CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
             INSERT INTO meta VALUES ('schema', '2'), ('chain', '0xgenesis'), ('sender', '0xabc'), ('chain_id', '1');",
        )
        .unwrap();
    for n in 0..3u64 {
        sql.conn
            .execute(
                "INSERT INTO sends VALUES (?1, ?2, ?3, '\"plain\"', ?4)",
                rusqlite::params![
                    hex::encode(&h(n, 0)),
                    n as i64,
                    tx(n).raw.clone(),
                    1_000 + n as i64
                ],
            )
            .unwrap();
    }
    sql
}

/// A lone transaction on a fresh storage writes its row and nothing else (schema 3: the chain,
/// sender and chain id in it; workerd also counts the table made as two rows), where schema 2
/// wrote four rows of meta besides; a restart reads all of it back from the row.
#[test]
fn a_lone_transaction_writes_one_row_with_its_chain_sender_and_chain_id() {
    let sql = Sqlite::new();
    let store = Store::open(sql.clone());
    assert_eq!(store.read().unwrap(), StorageSnapshot::default());
    store.store_chain("0xgenesis", "0xabc").unwrap();
    store.store_chain_id(1).unwrap();
    store.store(&row(0)).unwrap();
    assert_eq!(store.rows_written(), 1, "{:?}", sql.writes());
    assert_eq!(store.form(), Form::One);
    let again = Store::open(sql.clone());
    let snapshot = again.read().unwrap();
    assert_eq!(
        (
            snapshot.chain.as_deref(),
            snapshot.sender.as_deref(),
            snapshot.chain_id
        ),
        (Some("0xgenesis"), Some("0xabc"), Some(1))
    );
    assert_eq!(snapshot.rows.len(), 1);
    assert_eq!(again.load(&[h(0, 0)]).unwrap().len(), 1);
    // The chain id learned after the first row: given to the rows already written.
    let late = Sqlite::new();
    let store = Store::open(late.clone());
    store.read().unwrap();
    store.store(&row(0)).unwrap();
    store.store_chain_id(5).unwrap();
    assert_eq!(Store::open(late.clone()).read().unwrap().chain_id, Some(5));
}

/// What tracking learned of a transaction is kept in its row (one row written) and read back
/// with its header by the next instance; in schema 2's form it is not stored (nothing written).
#[test]
fn a_rows_progress_is_kept_and_read_back() {
    let sql = stored();
    let store = Store::open(sql.clone());
    store.read().unwrap();
    let before = store.rows_written();
    let progress = RowProgress {
        resent: 2,
        since_block: Some(100),
        public: true,
        vouched: true,
        taken_by: TakenBy::route(1),
        route_cancelled: true,
    };
    store.progress(&h(1, 0), progress).unwrap();
    store.progress(&h(9, 0), progress).unwrap();
    assert_eq!(
        store.rows_written(),
        before + 1,
        "one row; none for a row not there"
    );
    let snapshot = Store::open(sql.clone()).read().unwrap();
    let of = |n: u64| header_of(&snapshot, n).progress;
    assert_eq!((of(1), of(0)), (progress, RowProgress::default()));
    let v2 = stored_v2();
    let store = Store::open(v2.clone());
    store.read().unwrap();
    let writes = v2.writes().len();
    store.progress(&h(1, 0), progress).unwrap();
    assert_eq!(v2.writes().len(), writes);
}

/// A release of schema 2 reads `meta` as key-value rows first: on schema 3's table that read
/// fails for another reason than a missing table, which that release's read reports as
/// unreadable (it was tried again once, then `ReadError::Unreadable`): it writes nothing and fails
/// open. Its statements, as it ran them:
#[test]
fn a_release_of_schema_2_cannot_read_schema_3_and_so_leaves_it_alone() {
    let sql = stored();
    let e = sql
        .exec("SELECT key, value FROM meta", Vec::new())
        .unwrap_err();
    assert!(!e.contains("no such table"), "{e}");
    assert!(e.contains("no such column"), "{e}");
    assert_eq!(sql.count("SELECT COUNT(*) FROM meta"), 3);
}

/// What a sender asked of the private route (its opt-in, its `maxBlockNumber`) is kept in the
/// row's method and read back with the row's header after a restart; a plain row has none.
#[test]
fn a_private_sends_terms_are_kept_in_its_row() {
    let sql = stored();
    let store = Store::open(sql.clone());
    store.read().unwrap();
    let mut private = (*tx(7)).clone();
    private.method = SendMethod::Private {
        max_block_number: Some(50),
        preferences: Some(serde_json::json!({"fast": true})),
    };
    private.public_after_blocks = Some(3);
    store
        .store(&Row {
            tx: Rc::new(private.clone()),
            at_ms: 2_000,
        })
        .unwrap();
    let snapshot = Store::open(sql.clone()).read().unwrap();
    let terms = |nonce: u64| header_of(&snapshot, nonce).terms;
    assert_eq!(terms(7), private.terms());
    assert_eq!(terms(7).max_block_number, Some(50));
    assert_eq!(terms(7).public_after_blocks, Some(3));
    assert_eq!(terms(0), Default::default());
}

#[test]
fn a_read_that_fails_is_an_error_never_nothing_stored_and_nothing_is_written() {
    let sql = stored();
    let writes = sql.writes().len();
    // A new instance whose reads fail (twice: the read is tried again once).
    sql.fail_reads.set(2);
    let store = Store::open(sql.clone());
    let Err(ReadError::Unreadable(e)) = store.read() else {
        panic!("a failed read is not an empty storage")
    };
    assert!(e.message.contains("SQLITE_IOERR"), "{e}");
    assert_eq!(
        sql.writes().len(),
        writes,
        "nothing written, nothing deleted"
    );
    assert_eq!(sql.count("SELECT COUNT(*) FROM meta"), 3);
    // The next instance (the object's next request) reads it whole.
    let store = Store::open(sql.clone());
    let snapshot = store.read().unwrap();
    assert_eq!(snapshot.rows.len(), 3);
    assert_eq!(
        (snapshot.chain.as_deref(), snapshot.chain_id),
        (Some("0xgenesis"), Some(1))
    );
    // One failure alone is tried again within the read.
    sql.fail_reads.set(1);
    assert_eq!(Store::open(sql.clone()).read().unwrap().rows.len(), 3);
}

#[test]
fn a_newer_schema_is_left_alone() {
    let sql = stored();
    sql.conn
        .execute("UPDATE meta SET schema = 4 WHERE nonce = 1", [])
        .unwrap();
    let writes = sql.writes().len();
    let store = Store::open(sql.clone());
    assert_eq!(store.read(), Err(ReadError::Newer { found: "4".into() }));
    assert_eq!(sql.writes().len(), writes, "untouched");
    assert_eq!(sql.count("SELECT COUNT(*) FROM meta"), 3);
    assert!(ReadError::Newer { found: "4".into() }
        .to_string()
        .contains("newer than this release's 3"));
    // Schema 2's key-value meta saying a schema it never wrote is no form this code knows.
    let sql = stored_v2();
    sql.conn
        .execute("UPDATE meta SET value = '3' WHERE key = 'schema'", [])
        .unwrap();
    assert_eq!(
        Store::open(sql.clone()).read(),
        Err(ReadError::Newer { found: "3".into() })
    );
    sql.conn
        .execute("UPDATE meta SET value = 'x' WHERE key = 'schema'", [])
        .unwrap();
    assert!(matches!(
        Store::open(sql.clone()).read(),
        Err(ReadError::Newer { .. })
    ));
    assert_eq!(sql.count("SELECT COUNT(*) FROM sends"), 3);
}

/// Storage a release of schema 2 left is read, and written in its form, until it is vacated or
/// wiped: then the next write makes schema 3's table.
#[test]
fn storage_of_schema_2_is_read_and_kept_in_its_form_until_it_goes() {
    let sql = stored_v2();
    let store = Store::open(sql.clone());
    let snapshot = store.read().unwrap();
    assert_eq!(store.form(), Form::Tables);
    assert_eq!(snapshot.rows.len(), 3);
    assert_eq!(
        (
            snapshot.chain.as_deref(),
            snapshot.sender.as_deref(),
            snapshot.chain_id
        ),
        (Some("0xgenesis"), Some("0xabc"), Some(1))
    );
    store.release(&[h(0, 0)]).unwrap();
    store.store(&row(3)).unwrap();
    assert_eq!(sql.count("SELECT COUNT(*) FROM sends"), 3, "overwritten");
    store.forget(&[h(1, 0)]).unwrap();
    assert_eq!(sql.count("SELECT COUNT(*) FROM sends"), 2);
    assert_eq!(store.load(&[h(3, 0), h(2, 0)]).unwrap().len(), 2);
    store.wipe().unwrap();
    store.store(&row(7)).unwrap();
    assert_eq!(store.form(), Form::One);
    let again = Store::open(sql.clone());
    assert_eq!(
        again
            .read()
            .unwrap()
            .rows
            .iter()
            .map(|r| r.nonce)
            .collect::<Vec<_>>(),
        vec![7]
    );
    assert_eq!(again.form(), Form::One);
}

/// Storage written by def57e0 and earlier (table `sends`, meta without `schema`) reads as it
/// did; the first write adds the schema.
#[test]
fn storage_of_the_release_before_the_schema_reads_as_before() {
    let sql = Sqlite::new();
    sql.conn
        .execute_batch(
            "CREATE TABLE sends (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, raw BLOB NOT NULL, method TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID;
             CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
             CREATE TABLE txs (hash TEXT PRIMARY KEY, nonce INTEGER NOT NULL, request TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID;
             INSERT INTO meta VALUES ('chain', '0xgenesis'), ('sender', '0xabc');",
        )
        .unwrap();
    let raw = tx(4).raw.clone();
    sql.conn
        .execute(
            "INSERT INTO sends VALUES (?1, 4, ?2, '\"plain\"', 5)",
            rusqlite::params![hex::encode(&h(4, 0)), raw],
        )
        .unwrap();
    let store = Store::open(sql.clone());
    let snapshot = store.read().unwrap();
    assert_eq!(snapshot.rows.len(), 1);
    assert_eq!(snapshot.chain.as_deref(), Some("0xgenesis"));
    store.store(&row(5)).unwrap();
    assert_eq!(
        sql.count("SELECT COUNT(*) FROM meta WHERE key = 'schema' AND value = '2'"),
        1
    );
}

/// A cancel's tombstone takes its transaction's row (one row written, the bytes gone, schema
/// 4) and is read back as a tombstone, not a transaction to send; one with no row is written
/// with the chain, sender and chain id; released once its nonce is used, the next transaction
/// overwrites it. A row saying schema 4 that is no tombstone is newer than this code.
#[test]
fn a_tombstone_takes_its_rows_place_and_reads_back_as_one() {
    let sql = stored();
    let store = Store::open(sql.clone());
    store.read().unwrap();
    let before = store.rows_written();
    store
        .bury(
            &Tombstone {
                nonce: 1,
                hash: h(1, 0),
            },
            5_000,
        )
        .unwrap();
    assert_eq!(store.rows_written(), before + 1, "{:?}", sql.writes());
    store
        .bury(
            &Tombstone {
                nonce: 7,
                hash: h(7, 0),
            },
            5_000,
        )
        .unwrap();
    let again = Store::open(sql.clone());
    let snapshot = again.read().unwrap();
    let nonces: Vec<u64> = snapshot.rows.iter().map(|r| r.nonce).collect();
    assert_eq!(nonces, [0, 2], "the tombstones are no transactions");
    let mut buried = snapshot.tombstones.clone();
    buried.sort();
    assert_eq!(
        buried,
        [
            Tombstone {
                nonce: 1,
                hash: h(1, 0)
            },
            Tombstone {
                nonce: 7,
                hash: h(7, 0)
            }
        ]
    );
    assert_eq!(snapshot.chain_id, Some(1));
    let bytes = "SELECT COUNT(*) FROM meta WHERE length(raw) = 0 AND schema = 4";
    assert_eq!(sql.count(bytes), 2, "their bytes gone");
    // Its nonce used: released, and the next transaction stored overwrites it.
    again.release(&[h(1, 0)]).unwrap();
    let written = again.rows_written();
    again.store(&row(3)).unwrap();
    assert_eq!(again.rows_written(), written + 1);
    let snapshot = Store::open(sql.clone()).read().unwrap();
    assert_eq!(
        snapshot.tombstones,
        [Tombstone {
            nonce: 7,
            hash: h(7, 0)
        }]
    );
    // Any other row saying 4 is newer than this code: left alone.
    sql.conn
        .execute("UPDATE meta SET schema = 4 WHERE nonce = 0", [])
        .unwrap();
    assert_eq!(
        Store::open(sql.clone()).read(),
        Err(ReadError::Newer { found: "4".into() })
    );
}

#[test]
fn a_released_row_is_overwritten_by_the_next_one_stored() {
    let sql = stored();
    let store = Store::open(sql.clone());
    assert_eq!(store.read().unwrap().rows.len(), 3);
    let before = store.rows_written();
    store.release(&[h(0, 0), h(1, 0)]).unwrap();
    assert_eq!(store.rows_written(), before, "a release writes nothing");
    assert_eq!(store.released_count(), 2);
    store.store(&row(3)).unwrap();
    store.store(&row(4)).unwrap();
    store.store(&row(5)).unwrap();
    assert_eq!(store.rows_written(), before + 3, "one row a transaction");
    assert_eq!(
        sql.count("SELECT COUNT(*) FROM meta"),
        4,
        "two overwritten, one added"
    );
    // (The test's raw bytes are no transaction: each row reads back as one that is not a send of
    // its hash, which names the row found.)
    let loaded = store.load(&[h(3, 0), h(4, 0), h(0, 0)]).unwrap();
    let found: Vec<TxHash> = loaded
        .iter()
        .map(|tx| tx.as_ref().map_or_else(|(hash, _)| *hash, |tx| tx.hash))
        .collect();
    assert_eq!(found, vec![h(3, 0), h(4, 0)], "the released ones are gone");
    // A forget of a live row deletes it; of a released one, nothing (it waits to be overwritten).
    store.release(&[h(2, 0)]).unwrap();
    store.forget(&[h(2, 0), h(5, 0)]).unwrap();
    assert_eq!(store.rows_written(), before + 4);
    assert_eq!(sql.count("SELECT COUNT(*) FROM meta"), 3);
}

#[test]
fn a_wipe_deletes_everything_and_the_next_write_starts_anew() {
    let sql = stored();
    let store = Store::open(sql.clone());
    store.read().unwrap();
    store.wipe().unwrap();
    assert_eq!(sql.count("SELECT COUNT(*) FROM meta"), 0);
    store.store(&row(7)).unwrap();
    assert_eq!(
        sql.count("SELECT COUNT(*) FROM meta WHERE schema = 3 AND chain IS NULL"),
        1,
        "what the rows belonged to went with them"
    );
    let again = Store::open(sql.clone()).read().unwrap();
    assert_eq!(
        again.rows.iter().map(|r| r.nonce).collect::<Vec<_>>(),
        vec![7]
    );
}

/// The machine's actions carried out on a store over SQLite; sends and lookups recorded for the
/// test to answer.
struct Object {
    store: Store<Sqlite>,
    now: u64,
    sends: Vec<(SessionKey, Rc<SignedTx>)>,
    lookups: Vec<(LookupId, Query)>,
    answers: BTreeMap<Ticket, Answer>,
    vacated: u32,
    /// The storage alarm, as the machine last set it.
    alarm: Option<u64>,
}

impl Effects for Object {
    fn now_ms(&self) -> u64 {
        self.now
    }
    fn answer(&mut self, ticket: Ticket, answer: Answer, _retry_after_s: Option<u64>) {
        self.answers.insert(ticket, answer);
    }
    fn store(&mut self, row: Row) -> Result<(), Unstorable> {
        self.store.store(&row).map_err(|e| Unstorable(e.message))
    }
    fn forget(&mut self, hashes: Vec<TxHash>) {
        self.store.forget(&hashes).unwrap();
    }
    fn release(&mut self, hashes: Vec<TxHash>) {
        self.store.release(&hashes).unwrap();
    }
    fn wipe(&mut self) {
        self.store.wipe().unwrap();
    }
    fn vacate(&mut self) {
        // As the platform's deleteAll: the whole database goes, outside the SQL it counts.
        self.store
            .sql()
            .conn
            .execute_batch(
                "DROP TABLE IF EXISTS sends; DROP TABLE IF EXISTS meta; DROP TABLE IF EXISTS txs;",
            )
            .unwrap();
        self.store.vacated();
        self.vacated += 1;
    }
    fn store_chain(&mut self, genesis: String) {
        self.store.store_chain(&genesis, "0xabc").unwrap();
    }
    fn progress(&mut self, hash: TxHash, progress: RowProgress) {
        self.store.progress(&hash, progress).unwrap();
    }
    fn bury(&mut self, tombstone: Tombstone) {
        self.store.bury(&tombstone, self.now).unwrap();
    }
    fn load(&mut self, hashes: &[TxHash]) -> Vec<Rc<SignedTx>> {
        self.store
            .load(hashes)
            .unwrap()
            .into_iter()
            .filter_map(Result::ok)
            .collect()
    }
    fn send(
        &mut self,
        key: SessionKey,
        tx: Rc<SignedTx>,
        _deadline_ms: u64,
        _rid: Option<Rc<str>>,
    ) {
        self.sends.push((key, tx));
    }
    fn lookup(&mut self, id: LookupId, query: Query, _deadline_ms: u64) {
        self.lookups.push((id, query));
    }
    fn publish(&mut self, _hashes: Vec<TxHash>, _deadline_ms: u64) {}
    fn cancel(&mut self, _ticket: Ticket, _hash: TxHash, _routes: TakenBy, _deadline_ms: u64) {}
    fn alarm(&mut self, at_ms: Option<u64>) {
        self.alarm = at_ms;
    }
    fn emit(&mut self, _metric: Metric) {}
}

const BUSY: Settings = Settings {
    track_interval_ms: 12_000,
    ..Settings::DEFAULT
};

/// The upstream for [`Object`]: every lookup answered from the chain `mined` (every
/// transaction below it in a block, none pending).
fn answer_lookups(s: &mut Sender, o: &mut Object, mined: u64) {
    while !o.lookups.is_empty() {
        let (id, query) = o.lookups.remove(0);
        let known = query
            .hashes
            .iter()
            .map(|hash| {
                let nonce = u64::from_be_bytes(hash[..8].try_into().unwrap());
                let seen = match nonce < mined {
                    true => Seen::Included { block: nonce + 1 },
                    false => Seen::Missing,
                };
                (*hash, seen)
            })
            .collect();
        let found = Found {
            pending: Some(mined),
            latest: Some(mined),
            genesis: query.genesis.then(|| "0xgenesis".into()),
            known,
            ..Found::default()
        };
        s.looked_up(id, Ok(found), o.now);
        s.run(o);
    }
}

/// A busy sender (one transaction every 40 ms on a node that mines each at once, tracking every
/// 12 s) writes about one row per transaction: each stored over a row whose nonce a check found
/// used. Restarted on what it wrote, it reads the released rows back, finds them in blocks and
/// sends nothing again.
#[test]
fn a_busy_sender_writes_about_one_row_per_transaction_and_restarts_on_it() {
    const TOTAL: u64 = 2_000;
    let sql = Sqlite::new();
    let mut o = Object {
        store: Store::open(sql.clone()),
        now: 1_000,
        sends: Vec::new(),
        lookups: Vec::new(),
        answers: BTreeMap::new(),
        vacated: 0,
        alarm: None,
    };
    o.store.read().unwrap();
    let mut s = Sender::new(BUSY);
    s.set_address("0xabc");
    for n in 0..TOTAL {
        o.now += 40;
        s.handle_timeout(o.now);
        s.run(&mut o);
        answer_lookups(&mut s, &mut o, n);
        s.arrive(
            Ticket(n),
            Arrival {
                tx: tx(n),
                request_id: None,
            },
            o.now,
        );
        s.run(&mut o);
        answer_lookups(&mut s, &mut o, n);
        let (key, sent) = o.sends.remove(0);
        s.sent(
            key,
            &sent,
            Sent {
                class: AnswerClass::Accepted,
                answer: Answer::hash(&sent.hash),
                attempts: 1,
                route: None,
            },
            o.now,
        );
        s.run(&mut o);
    }
    assert_eq!(o.answers.len() as u64, TOTAL);
    assert!(o.answers.values().all(|a| a.error_parts().is_none()));
    // One row a transaction, and the meta again each time the storage went with a quiet object
    // (SQLite does not count the tables made; workerd counts two rows each).
    let per_tx = o.store.rows_written() as f64 / TOTAL as f64;
    assert!(
        (1.0..1.05).contains(&per_tx),
        "{} rows written for {TOTAL} transactions, {} vacated",
        o.store.rows_written(),
        o.vacated
    );
    let live = o.store.row_count() - o.store.released_count();
    assert!(
        live <= 12_000 / 40 + 1,
        "only the unchecked ones live: {live}"
    );

    // A restart on that storage: every row comes back (released ones too), the first check
    // finds each in a block, and nothing is sent again.
    let store = Store::open(sql.clone());
    let snapshot = store.read().unwrap();
    assert_eq!(snapshot.rows.len(), o.store.row_count());
    let mut o = Object {
        store,
        now: o.now + 1,
        sends: Vec::new(),
        lookups: Vec::new(),
        answers: BTreeMap::new(),
        vacated: 0,
        alarm: None,
    };
    let mut s = Sender::new(BUSY);
    s.set_address("0xabc");
    s.restore(snapshot.chain, &snapshot.rows, &snapshot.tombstones, o.now);
    s.run(&mut o);
    for _ in 0..3 {
        answer_lookups(&mut s, &mut o, TOTAL);
        // The in-memory timer, or the storage alarm that an idle sender's checks come with.
        let due = [s.poll_timeout(), o.alarm].into_iter().flatten().min();
        o.now = due.unwrap_or(o.now).max(o.now + 1);
        if o.alarm.is_some_and(|at| at <= o.now) {
            s.alarm(o.now);
        } else {
            s.handle_timeout(o.now);
        }
        s.run(&mut o);
        answer_lookups(&mut s, &mut o, TOTAL);
    }
    assert!(o.sends.is_empty(), "nothing sent again");
    assert_eq!(s.view(o.now)["tracked"], 0, "{}", s.view(o.now));
    assert_eq!(s.counters.included as usize, snapshot.rows.len());
}

/// Storage of another chain (the default chain's `CHAIN_ID` moved) is no storage this object can
/// use: kept untouched, its transactions listed; a snapshot without a chain id, or of this
/// chain, or holding nothing, is usable. An object that cannot serve its storage wakes itself
/// about 60 times over a day, then stops.
#[test]
fn storage_of_another_chain_is_left_alone_and_its_object_stops_waking_after_a_day() {
    let sql = stored();
    let snapshot = Store::open(sql.clone()).read().unwrap();
    assert_eq!(snapshot.of_other_chain(Some(1)), None, "its own chain");
    assert_eq!(
        snapshot.of_other_chain(None),
        None,
        "the chain not known yet"
    );
    let Some(ReadError::OtherChain(other)) = snapshot.of_other_chain(Some(5)) else {
        panic!("another chain's storage")
    };
    assert_eq!((other.stored, other.serving, other.rows.len()), (1, 5, 3));
    assert_eq!(other.newest_ms, 1_002);
    assert_eq!(ReadError::OtherChain(other.clone()).label(), "other_chain");
    assert_eq!(StorageSnapshot::default().of_other_chain(Some(5)), None);
    // Waking: a minute at first, an eighth of the age later, an hour at most, none past a day.
    assert_eq!(unserved_retry_at(1_000, 1_000), Some(61_000));
    assert_eq!(unserved_retry_at(8_000_000, 0), Some(9_000_000));
    let day = UNSERVED_GIVE_UP_MS;
    assert_eq!(unserved_retry_at(day, 0), Some(day + 3_600_000));
    assert_eq!(unserved_retry_at(day + 1, 0), None);
    let (mut now, mut tries) = (0, 0);
    while let Some(at) = unserved_retry_at(now, 0) {
        now = at;
        tries += 1;
    }
    assert!((50..=70).contains(&tries), "{tries} tries");
}
