//! What an API key costs a request in the Worker's CPU, natively (issue 55): the key read from the
//! path and its checksum checked, its HMAC under RELAY_SECRET (the isolate's lease table's key),
//! and a contract scope's check of one `eth_call`. The lease itself is a table lookup; the key's
//! object is asked only when a lease is spent (every 100 units or 10 s).
use criterion::{criterion_group, criterion_main, Criterion};
use nonce_relay::access::keys::key::{key_in, ApiKey};
use nonce_relay::access::keys::scope::Scope;
use serde_json::json;
use std::hint::black_box;

fn keys(c: &mut Criterion) {
    let key = ApiKey::from_random([7; 16]);
    let text = key.reveal().to_string();
    let secret = b"0123456789abcdef0123456789abcdef";
    let scope = Scope {
        contracts: vec!["0x00000000000000000000000000000000000000aa"
            .parse()
            .unwrap()],
        ..Scope::default()
    };
    let params =
        json!([{"to": "0x00000000000000000000000000000000000000aa", "data": "0x"}, "latest"]);
    c.bench_function("key: read, checksum, HMAC", |b| {
        b.iter(|| {
            let nonce_relay::access::keys::key::KeyIn::Key(key) =
                key_in(Some(black_box(&text)), None)
            else {
                panic!("a key")
            };
            black_box(key.hash(secret))
        })
    });
    c.bench_function("key: contract scope of one eth_call", |b| {
        b.iter(|| black_box(scope.check_read(black_box("eth_call"), black_box(&params))))
    });
}

criterion_group!(benches, keys);
criterion_main!(benches);
