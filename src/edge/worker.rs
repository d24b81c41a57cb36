//! The Worker's fetch handler (wasm32 only): HTTP routing, limits, and the [`Backend`] that the
//! relay core runs on: the upstream over `fetch`, each sender's `SenderLock` Durable Object, and
//! `console.log` for structured log lines.

use crate::chain_id::ChainIdCache;
use crate::config::{Config, ConfigError};
use crate::jsonrpc::{self, RpcError};
use crate::metrics::Metric;
use crate::relay::{Backend, Relay, UpstreamError};
use crate::transaction::Transaction;
use crate::edge::upstream;
use serde_json::Value;
use std::cell::OnceCell;
use std::rc::Rc;
use worker::wasm_bindgen::JsValue;
use worker::{
    console_log, event, AnalyticsEngineDataPointBuilder, Context, Delay, Env, Headers, Method,
    Request, RequestInit, Response,
};

/// The Durable Object namespace binding (wrangler.toml `[[durable_objects.bindings]]`).
pub const SENDER_LOCK_BINDING: &str = "SENDER_LOCK";
/// Request header to the Durable Object: the sender's lowercase 0x address (for its logs).
pub const SENDER_HEADER: &str = "x-sender";
/// Request header to the Durable Object: the transaction's nonce, decimal.
pub const NONCE_HEADER: &str = "x-nonce";

thread_local! {
    /// The chain id learned from the upstream, for this isolate's lifetime.
    static CHAIN_IDS: Rc<ChainIdCache> = Rc::new(ChainIdCache::new());
    /// The settings, read by the isolate's first request: vars and secrets do not change during
    /// an isolate's life (the Durable Object reads them once too).
    static CONFIG: OnceCell<Rc<Result<Config, ConfigError>>> = const { OnceCell::new() };
}

/// The Analytics Engine dataset binding for metrics (optional).
pub const METRICS_BINDING: &str = "METRICS";

/// Records `metric`: always a JSON log line; a data point too when `METRICS` is bound.
pub fn emit(env: &Env, metric: &Metric) {
    console_log!("{}", metric.log_line());
    if let Ok(dataset) = env.analytics_engine(METRICS_BINDING) {
        let written = AnalyticsEngineDataPointBuilder::new()
            .indexes([metric.index()])
            .blobs([metric.event, metric.label.as_str()])
            .doubles(metric.doubles())
            .write_to(&dataset);
        if let Err(e) = written {
            console_log!(
                "{}",
                crate::log::line("metrics_error", &[("error", e.to_string().into())])
            );
        }
    }
}

/// The time, Unix ms. The Workers clock advances across I/O, not while code computes.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// Reads [`Config`] from the Worker's vars and secrets.
pub fn config_from_env(env: &Env) -> Result<Config, ConfigError> {
    Config::from_lookup(|name| {
        env.secret(name)
            .ok()
            .map(|s| s.to_string())
            .or_else(|| env.var(name).ok().map(|v| v.to_string()))
    })
}

fn json_response(status: u16, body: String) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(body)?
        .with_status(status)
        .with_headers(headers))
}

struct WorkerBackend<'a> {
    config: &'a Config,
    env: &'a Env,
    /// The client's `x-test-fault` header, passed on to the Durable Object (test builds only).
    #[cfg(feature = "test-faults")]
    test_fault: Option<String>,
}

/// Test builds only: the fault to inject (see the `test-faults` feature).
#[cfg(feature = "test-faults")]
pub const TEST_FAULT_HEADER: &str = "x-test-fault";

impl Backend for WorkerBackend<'_> {
    async fn upstream(&self, body: &str) -> Result<String, UpstreamError> {
        upstream::post(self.config, body, self.config.upstream_timeout_ms).await
    }

    async fn sender_lock(&self, tx: &Transaction, body: &str) -> Result<String, String> {
        let sender = tx.sender;
        let stub = self
            .env
            .durable_object(SENDER_LOCK_BINDING)
            .and_then(|ns| ns.get_by_name(&sender.to_string()))
            .map_err(|e| e.to_string())?;
        let headers = Headers::new();
        headers
            .set(SENDER_HEADER, &sender.to_string())
            .map_err(|e| e.to_string())?;
        headers
            .set(NONCE_HEADER, &tx.nonce.to_string())
            .map_err(|e| e.to_string())?;
        #[cfg(feature = "test-faults")]
        if let Some(fault) = self.test_fault.as_deref() {
            headers
                .set(TEST_FAULT_HEADER, fault)
                .map_err(|e| e.to_string())?;
        }
        let mut init = RequestInit::new();
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(JsValue::from_str(body)));
        let request =
            Request::new_with_init("https://sender-lock/send", &init).map_err(|e| e.to_string())?;
        let mut response = stub
            .fetch_with_request(request)
            .await
            .map_err(|e| e.to_string())?;
        if response.status_code() != 200 {
            return Err(format!(
                "Durable Object answered HTTP {}",
                response.status_code()
            ));
        }
        response.text().await.map_err(|e| e.to_string())
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(std::time::Duration::from_millis(ms)).await;
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn emit(&self, metric: &Metric) {
        emit(self.env, metric);
    }
}

async fn handle_rpc(mut req: Request, env: &Env) -> worker::Result<Response> {
    let settings = CONFIG.with(|cell| cell.get_or_init(|| Rc::new(config_from_env(env))).clone());
    let config = match settings.as_ref() {
        Ok(config) => config,
        Err(e) => {
            console_log!(
                "{}",
                crate::log::line("config_error", &[("error", e.to_string().into())])
            );
            let error = RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string());
            return json_response(500, error.response(&Value::Null));
        }
    };
    let too_large = || {
        let error = RpcError::new(
            jsonrpc::LIMIT_EXCEEDED,
            format!("request body exceeds {} bytes", config.max_request_bytes),
        );
        json_response(413, error.response(&Value::Null))
    };
    let declared = req
        .headers()
        .get("content-length")?
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > config.max_request_bytes) {
        return too_large();
    }
    let body = req.bytes().await?;
    if body.len() > config.max_request_bytes {
        return too_large();
    }
    let backend = WorkerBackend {
        config,
        env,
        #[cfg(feature = "test-faults")]
        test_fault: req.headers().get(TEST_FAULT_HEADER)?,
    };
    let chain_ids = CHAIN_IDS.with(Rc::clone);
    let reply = Relay::new(config, &backend, &chain_ids).handle(&body).await;
    match reply.body {
        Some(body) => json_response(reply.status, body),
        None => Ok(Response::empty()?.with_status(reply.status)),
    }
}

/// Bench-only route: decodes `raw` `iterations` times. Timed from outside against
/// `iterations: 0` (a Worker's clocks do not advance while it computes).
#[cfg(feature = "bench")]
async fn bench_decode(mut req: Request) -> worker::Result<Response> {
    #[derive(serde::Deserialize)]
    struct Job {
        raw: String,
        iterations: u32,
    }
    let job: Job = req.json().await?;
    let raw = crate::hex::decode(&job.raw).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let mut ok = 0u32;
    for _ in 0..job.iterations {
        ok += u32::from(crate::transaction::decode(std::hint::black_box(&raw)).is_ok());
    }
    json_response(
        200,
        serde_json::json!({ "iterations": job.iterations, "ok": ok }).to_string(),
    )
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> worker::Result<Response> {
    match (req.method(), req.path().as_str()) {
        (Method::Post, "/") => handle_rpc(req, &env).await,
        (Method::Get, "/health") => json_response(200, r#"{"status":"ok"}"#.into()),
        #[cfg(feature = "bench")]
        (Method::Post, "/__bench/decode") => bench_decode(req).await,
        (_, "/") => {
            let error = RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC requests are POSTed to /",
            );
            let response = json_response(405, error.response(&Value::Null))?;
            response.headers().set("allow", "POST")?;
            Ok(response)
        }
        _ => Response::error("not found", 404),
    }
}
