//! The Worker's fetch handler (wasm32 only): HTTP routing, limits, and the [`Backend`] that the
//! relay core runs on: the upstream over `fetch`, each sender's `SenderLock` Durable Object, and
//! `console.log` for structured log lines.

use crate::address::Address;
use crate::admin;
use crate::chain_id::ChainIdCache;
use crate::config::{Config, ConfigError};
use crate::edge::upstream::HttpUpstream;
use crate::jsonrpc::{self, Answer, RpcError};
use crate::metrics::Metric;
use crate::relay::{wire, Backend, Relay};
use crate::upstream::{Upstream, UpstreamError, UpstreamReply};
use serde_json::Value;
use std::cell::OnceCell;
use std::rc::Rc;
use worker::wasm_bindgen::JsValue;
use worker::{
    console_log, event, AnalyticsEngineDataPointBuilder, Context, Env, Headers, Method, Request,
    RequestInit, Response,
};

/// The Durable Object namespace binding (wrangler.toml `[[durable_objects.bindings]]`).
pub const SENDER_LOCK_BINDING: &str = "SENDER_LOCK";
/// Request header to the Durable Object: the sender's lowercase 0x address (for its logs).
pub const SENDER_HEADER: &str = "x-sender";

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
    upstream: HttpUpstream<'a>,
    env: &'a Env,
    /// The client's `x-test-fault` header, passed on to the Durable Object (test builds only).
    #[cfg(feature = "test-faults")]
    test_fault: Option<String>,
}

/// Test builds only: the fault to inject (see the `test-faults` feature).
#[cfg(feature = "test-faults")]
pub const TEST_FAULT_HEADER: &str = "x-test-fault";

/// Calls `sender`'s Durable Object: `method` on `path` (see [`wire`]) with an optional body;
/// returns the answer's text.
///
/// # Errors
/// The reason when the object can't be reached or answers other than HTTP 200.
async fn call_object(
    env: &Env,
    sender: &Address,
    method: Method,
    path: &str,
    body: Option<String>,
    headers: Headers,
) -> Result<String, String> {
    let stub = env
        .durable_object(SENDER_LOCK_BINDING)
        .and_then(|ns| ns.get_by_name(&sender.to_string()))
        .map_err(|e| e.to_string())?;
    headers
        .set(SENDER_HEADER, &sender.to_string())
        .map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(JsValue::from_str(&body)));
    }
    let request = Request::new_with_init(&format!("https://sender-lock{path}"), &init)
        .map_err(|e| e.to_string())?;
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

impl Upstream for WorkerBackend<'_> {
    async fn post(&self, body: &str, timeout_ms: u64) -> Result<UpstreamReply, UpstreamError> {
        self.upstream.post(body, timeout_ms).await
    }

    async fn sleep(&self, ms: u64) {
        self.upstream.sleep(ms).await;
    }

    fn now_ms(&self) -> u64 {
        now_ms()
    }

    fn random(&self) -> f64 {
        self.upstream.random()
    }

    fn emit(&self, metric: &Metric) {
        emit(self.env, metric);
    }
}

impl Backend for WorkerBackend<'_> {
    async fn sender_lock(
        &self,
        sender: &Address,
        txs: &[(&[u8; 32], u64, &str)],
    ) -> Result<Vec<Answer>, String> {
        let headers = Headers::new();
        #[cfg(feature = "test-faults")]
        if let Some(fault) = self.test_fault.as_deref() {
            headers
                .set(TEST_FAULT_HEADER, fault)
                .map_err(|e| e.to_string())?;
        }
        let body = wire::encode_send(txs.iter().copied());
        let text = call_object(
            self.env,
            sender,
            Method::Post,
            wire::SEND_PATH,
            Some(body),
            headers,
        )
        .await?;
        wire::decode_answers(&text, txs.len())
    }

    async fn accepted_next_nonce(&self, sender: &Address) -> Result<Option<u64>, String> {
        let text = call_object(
            self.env,
            sender,
            Method::Get,
            wire::NEXT_NONCE_PATH,
            None,
            Headers::new(),
        )
        .await?;
        wire::decode_next_nonce(&text)
    }
}

/// The settings, read once per isolate.
fn settings(env: &Env) -> Rc<Result<Config, ConfigError>> {
    CONFIG.with(|cell| cell.get_or_init(|| Rc::new(config_from_env(env))).clone())
}

/// `GET /senders/{address}` with `Authorization: Bearer <ADMIN_TOKEN>`: the sender's object's
/// state. 404 when no `ADMIN_TOKEN` is set (the route does not exist), 401 for a missing or wrong
/// token, 400 for a path that is not an address.
async fn sender_view(req: &Request, env: &Env) -> worker::Result<Response> {
    let settings = settings(env);
    let Some(token) = settings
        .as_ref()
        .as_ref()
        .ok()
        .and_then(|c| c.admin_token.as_deref())
    else {
        return Response::error("not found", 404);
    };
    let authorization = req.headers().get("authorization")?;
    if !admin::bearer_matches(authorization.as_deref(), token) {
        let response = json_response(
            401,
            r#"{"error":"a valid bearer token is required"}"#.into(),
        )?;
        response.headers().set("www-authenticate", "Bearer")?;
        return Ok(response);
    }
    let sender = match admin::sender_of_path(&req.path()) {
        Some(Ok(sender)) => sender,
        Some(Err(why)) => {
            return json_response(400, serde_json::json!({ "error": why }).to_string())
        }
        None => return Response::error("not found", 404),
    };
    match call_object(env, &sender, Method::Get, wire::STATE_PATH, None, Headers::new()).await {
        Ok(state) => json_response(200, state),
        Err(why) => json_response(
            503,
            serde_json::json!({ "error": format!("the sender's Durable Object can't be reached: {why}") })
                .to_string(),
        ),
    }
}

async fn handle_rpc(mut req: Request, env: &Env) -> worker::Result<Response> {
    let settings = settings(env);
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
        upstream: HttpUpstream { config, env },
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
        (Method::Get, path) if path.starts_with(admin::SENDERS_PREFIX) => {
            sender_view(&req, &env).await
        }
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
