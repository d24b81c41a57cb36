//! Fuzzes the raw transaction decoder (raw bytes in): it must never panic, and must allocate at
//! most a small multiple of the input size (checked here with a counting allocator). Per-input
//! time is bounded by libFuzzer's `-timeout` (see `make fuzz`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes the decoder may hold at once: 64 per input byte (an RLP list of one-byte items costs one
/// view per byte) plus a fixed allowance for the signing hash and recovery.
fn allowance(input: usize) -> usize {
    64 * input + 64 * 1024
}

fuzz_target!(|data: &[u8]| {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = nonce_relay::transaction::decode(data);
    let used = PEAK.load(Ordering::Relaxed) - before;
    assert!(
        used <= allowance(data.len()),
        "decode of {} bytes held {used} bytes at once",
        data.len()
    );
    if let Ok(tx) = result {
        // What was accepted is self-consistent: its type byte leads the envelope.
        assert!(tx.tx_type.byte() == 0 || data[0] == tx.tx_type.byte());
    }
});
