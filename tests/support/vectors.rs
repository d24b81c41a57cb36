//! Where the ethereum/tests TransactionTests fixtures are: `$TRANSACTION_TESTS_DIR`, or the copy
//! in `tests/fixtures/TransactionTests` (ethereum/tests commit 4c87ebbf, 2024-10-24, MIT; data
//! only), so a fresh clone tests itself. Shared by the native tests that read them
//! (`#[path = "support/vectors.rs"] mod vectors;`).

use std::path::PathBuf;

/// The TransactionTests directory (its subfolders hold one JSON file per case group).
pub fn vectors_dir() -> PathBuf {
    std::env::var_os("TRANSACTION_TESTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/TransactionTests")
        })
}
