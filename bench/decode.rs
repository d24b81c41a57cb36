//! Decode + hash + sender recovery per transaction type, natively (criterion). The same work in
//! the wasm worker on workerd is measured by tests/bench/wasm-decode.mjs; both go to BENCHMARKS.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nonce_relay::{hex, transaction};

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/typed-transactions.json"
    );
    let all: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    all.iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                hex::decode(f["raw"].as_str().unwrap()).unwrap(),
            )
        })
        .collect()
}

fn decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode+hash+recover");
    for (name, raw) in fixtures() {
        group.throughput(Throughput::Bytes(raw.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(&name), &raw, |b, raw| {
            b.iter(|| transaction::decode(std::hint::black_box(raw)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
