//! The read cache's bound in bytes (`CACHE_MAX_BYTES`) against the heap its answers really take:
//! a counting allocator around the system's, one test alone in its binary (no other thread
//! allocates meanwhile). What the cache counts must cover what it allocates, for the answers a
//! dapp and an indexer leave in it (at the head, about unfinalized blocks, and finalized) and the
//! chain's headers it holds beside them.

use nonce_relay::cache::header::{Bloom, Contents, Header};
use nonce_relay::cache::policy::{key_of, About};
use nonce_relay::cache::proof::ProofRule;
use nonce_relay::cache::{CacheSettings, Finality, Read, ReadCache};
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn hash(n: u64) -> String {
    format!("0x{n:064x}")
}

#[test]
fn the_bytes_counted_cover_the_heap_the_answers_take() {
    const MAX: usize = 4 << 20;
    let settings = CacheSettings {
        head_ms: u64::MAX,
        finality: Finality::Tag,
        finality_depth: 64,
        proof: ProofRule::Blooms,
    };
    let chain = 31337;
    let before = HELD.load(Ordering::Relaxed);
    let mut cache = ReadCache::new(MAX);
    // The chain's headers, each with what it says of its block (counted in the bound too).
    for n in 1..=300 {
        let header = Header {
            number: n,
            hash: hash(n),
            parent_hash: hash(n - 1),
            contents: Some(Box::new(Contents {
                logs_bloom: Bloom([0xff; 256]),
                transactions_root: [1; 32],
                receipts_root: [2; 32],
            })),
        };
        cache.adopt(chain, &[header], 0, 0, 2);
    }
    cache.set_finalized(chain, 100, 0);
    // Four times the bound, in three shapes, one after another.
    let mut i = 0u64;
    while cache.evicted() < 3 * (MAX as u64 / 300) {
        i += 1;
        let address = format!("0x{i:040x}");
        let (method, params, about, result) = match i % 3 {
            0 => (
                "eth_getBalance",
                json!([address, "latest"]),
                About::Head,
                "\"0x21e19e0c9bab2400000\"".to_string(),
            ),
            1 => (
                "eth_getTransactionCount",
                json!([address, "0x5"]),
                About::Number(5),
                "\"0x1\"".to_string(),
            ),
            _ => (
                "eth_getTransactionReceipt",
                json!([hash(i)]),
                About::Answer,
                json!({"transactionHash": hash(i), "blockNumber": "0x96", "blockHash": hash(150), "status": "0x1", "logs": []}).to_string(),
            ),
        };
        let key = key_of(method, &params);
        let read = Read {
            method,
            params: &params,
            about,
            // Asked by its block's hash: a count by number is kept as before.
            pinned: true,
            answerer_head: None,
        };
        let _ = cache.store(chain, &key, read, &result, 0, &settings);
    }
    let grown = HELD.load(Ordering::Relaxed) - before;
    let (counted, entries) = cache.held();
    println!("{entries} entries, counted {counted} bytes, the heap grew {grown} bytes ({:.2} of counted)", grown as f64 / counted as f64);
    assert!(counted <= MAX);
    assert!(
        grown as f64 <= counted as f64 * 1.05,
        "the heap grew {grown} bytes for {counted} counted"
    );
}
