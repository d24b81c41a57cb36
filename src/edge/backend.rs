//! The relay core's [`Backend`] in the Worker: the upstream over `fetch`, the senders' Durable
//! Objects over their stubs, and the rate limit bindings.

use crate::access::rate_limit::{self, Bucket};
use crate::address::Address;
use crate::config::Config;
use crate::edge::platform::EdgePlatform;
use crate::edge::runtime::{emit, now_ms, read_cache, whole_text};
use crate::metrics::Metric;
use crate::ordering::tx::SignedTx;
use crate::relay::wire::WireAnswer;
use crate::relay::{wire, Backend, ObjectError};
use crate::transaction::TxHash;
use crate::upstream::heads::BlockNeed;
use crate::upstream::Platform;
use crate::upstream::{CallKind, UpstreamError, UpstreamReply};
use futures_util::future::join_all;
use worker::js_sys::{Function, Object, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{Env, Headers, Method, Request, RequestInit, Response};

/// The Durable Object namespace binding (wrangler.toml `[[durable_objects.bindings]]`).
pub const SENDER_LOCK_BINDING: &str = "SENDER_LOCK";
/// Request header to the Durable Object: the sender's lowercase 0x address (for its logs).
pub const SENDER_HEADER: &str = "x-sender";

/// Test builds only: the fault to inject (see the `test-faults` feature).
#[cfg(feature = "test-faults")]
pub const TEST_FAULT_HEADER: &str = "x-test-fault";

/// The backend of one Worker request.
pub struct WorkerBackend<'a> {
    /// The upstream, clock and metrics of this request.
    pub upstream: EdgePlatform<'a>,
    /// The environment (bindings).
    pub env: &'a Env,
    /// The client's IP (`CF-Connecting-IP`), the rate limits' key.
    pub client_ip: String,
    /// The origin (`https://host`) the shared cache's keys are URLs of
    /// ([`Backend::shared_get`]); `None`: no shared cache (a WebSocket's messages).
    pub cache_origin: Option<String>,
    /// The request's API key's hash, whose budget its members spend
    /// ([`crate::edge::keys::spend`]); `None` without a key.
    pub key: Option<crate::access::keys::key::KeyHash>,
    /// The key's rate-limit tier ([`crate::access::keys::KeyRecord::tier`]).
    pub tier: Option<String>,
    /// The key's last refusal by [`Backend::over_key_budget`] (a WebSocket closes on it).
    pub key_refused: std::cell::RefCell<Option<crate::access::keys::Refusal>>,
    /// The client's `x-test-fault` header, passed on to the Durable Object (test builds only).
    #[cfg(feature = "test-faults")]
    pub test_fault: Option<String>,
}

impl<'a> WorkerBackend<'a> {
    /// The backend of a request with this id.
    pub fn new(config: &'a Config, env: &'a Env, request_id: &'a str, client_ip: String) -> Self {
        WorkerBackend {
            upstream: EdgePlatform {
                config,
                env,
                request_id: Some(request_id),
            },
            env,
            client_ip,
            cache_origin: None,
            key: None,
            tier: None,
            key_refused: std::cell::RefCell::new(None),
            #[cfg(feature = "test-faults")]
            test_fault: None,
        }
    }

    /// The backend of a request with the API key `admitted`: its members spend the key's
    /// budget, and its rate limits are the key's (keyed by its id, on its tier's bindings:
    /// [`rate_limit::binding_name`]), not its IP's.
    pub fn with_key(mut self, admitted: Option<&crate::edge::keys::Admitted>) -> Self {
        if let Some(admitted) = admitted {
            self.client_ip = admitted.hash.id();
            self.key = Some(admitted.hash.clone());
            self.tier = admitted.record.tier.clone();
        }
        self
    }

    /// The shared cache's URL of `key` ([`crate::relay::cached::shared_key`]) under this
    /// request's origin.
    fn shared_url(&self, key: &str) -> Option<String> {
        Some(format!(
            "{}/__relay-cache/{key}",
            self.cache_origin.as_ref()?
        ))
    }

    fn headers(&self) -> Result<Headers, ObjectError> {
        let failed = |e: worker::Error| ObjectError::Failed(e.to_string());
        let headers = Headers::new();
        if let Some(id) = self.upstream.request_id {
            headers
                .set(crate::access::request_id::HEADER, id)
                .map_err(failed)?;
        }
        #[cfg(feature = "test-faults")]
        if let Some(fault) = self.test_fault.as_deref() {
            headers.set(TEST_FAULT_HEADER, fault).map_err(failed)?;
        }
        Ok(headers)
    }

    /// Counts `n` requests against the rate limit binding of `bucket` (the key's tier's, when it
    /// has one and its binding is there; else the deployment's); true when over. A binding that
    /// is not configured limits nothing; one that fails is logged and lets the request through.
    async fn over(&self, bucket: Bucket, n: usize) -> bool {
        if n == 0 {
            return false;
        }
        let tiered = self.tier.as_deref().and_then(|tier| {
            let name = rate_limit::binding_name(bucket, Some(tier));
            rate_limiter(self.env, &name).map(|b| (b, name))
        });
        let Some((binding, name)) = tiered.or_else(|| {
            let name = rate_limit::binding_name(bucket, None);
            rate_limiter(self.env, &name).map(|b| (b, name))
        }) else {
            return false;
        };
        let name = name.as_str();
        let checks = (0..n).map(|_| limit(&binding, &self.client_ip));
        let outcomes = join_all(checks).await;
        if let Some(Err(e)) = outcomes.iter().find(|o| o.is_err()) {
            self.emit(
                &Metric::new("rate_limit_error", "", name)
                    .value("count", 1.0)
                    .field("error", e.clone()),
            );
        }
        outcomes.into_iter().any(|o| o == Ok(false))
    }
}

/// The rate limit binding `name`, when configured.
pub fn rate_limiter(env: &Env, name: &str) -> Option<Object> {
    let env: &JsValue = env.as_ref();
    Reflect::get(env, &JsValue::from_str(name))
        .ok()
        .filter(|b| b.is_object())
        .map(JsCast::unchecked_into)
}

/// One `limit({key})` call of a Workers Rate Limiting binding: whether the request may go.
async fn limit(binding: &Object, key: &str) -> Result<bool, String> {
    let method: Function = Reflect::get(binding, &JsValue::from_str("limit"))
        .map_err(|_| "no limit method".to_string())?
        .dyn_into()
        .map_err(|_| "limit is not a function".to_string())?;
    let options = Object::new();
    Reflect::set(&options, &JsValue::from_str("key"), &JsValue::from_str(key))
        .map_err(|_| "cannot build the options".to_string())?;
    let promise: Promise = method
        .call1(binding, &options)
        .map_err(|e| format!("{e:?}"))?
        .dyn_into()
        .map_err(|_| "limit did not return a promise".to_string())?;
    let outcome = JsFuture::from(promise)
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(Reflect::get(&outcome, &JsValue::from_str("success"))
        .ok()
        .and_then(|v| v.as_bool())
        .unwrap_or(true))
}

/// What kind of failure a Durable Object call's error is: the runtime sets `.overloaded` and
/// `.retryable` on the errors it throws (Cloudflare's Durable Objects "Error handling"), and
/// `.durableObjectReset` when the object was reset (its code updated, or it aborted). A send to
/// the object is idempotent by transaction hash (copies join the first; a restarted object checks
/// its stored transactions by hash), so a reset is retried too.
fn object_error(error: worker::Error) -> ObjectError {
    let flag = |name: &str| {
        let value: JsValue = error.to_js_value();
        Reflect::get(&value, &JsValue::from_str(name))
            .ok()
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    };
    let why = error.to_string();
    if flag("overloaded") {
        ObjectError::Overloaded(why)
    } else if flag("retryable") || flag("durableObjectReset") {
        ObjectError::Retryable(why)
    } else {
        ObjectError::Failed(why)
    }
}

/// Calls `sender`'s Durable Object on a new stub: `method` on `path` (see [`wire`]); returns the
/// answer's text, `None` for HTTP 404 (the object knows nothing of what was asked).
///
/// # Errors
/// As [`call_object`], but for HTTP 404.
pub async fn call_object_or_missing(
    env: &Env,
    config: &Config,
    sender: &Address,
    method: Method,
    path: &str,
    headers: Headers,
) -> Result<Option<String>, ObjectError> {
    let response = request_object(env, config, sender, method, path, None, headers).await?;
    match response.status_code() {
        404 => Ok(None),
        _ => answer_text(response).await.map(Some),
    }
}

/// Calls `sender`'s Durable Object on the chain of `config` ([`Config::object_name`]) on a new
/// stub: `method` on `path` (see [`wire`]) with an optional body; returns the answer's text.
///
/// # Errors
/// [`ObjectError`]: the runtime's error by its flags; HTTP 503 with
/// [`wire::SUPERSEDED_HEADER`] (an instance a newer one superseded) is retryable; any other
/// status than 200 fails.
pub async fn call_object(
    env: &Env,
    config: &Config,
    sender: &Address,
    method: Method,
    path: &str,
    body: Option<String>,
    headers: Headers,
) -> Result<String, ObjectError> {
    let response = request_object(env, config, sender, method, path, body, headers).await?;
    answer_text(response).await
}

/// The text of an object's HTTP 200; its status and the start of its text (the object's own
/// words: why it cannot serve, such as a storage it cannot use) as the error otherwise.
async fn answer_text(response: Response) -> Result<String, ObjectError> {
    match response.status_code() {
        200 => whole_text(&response.into())
            .await
            .map_err(|e| ObjectError::Failed(format!("{e:?}"))),
        status => {
            let why = whole_text(&response.into()).await.unwrap_or_default();
            let why: String = why.chars().take(300).collect();
            Err(ObjectError::Failed(format!(
                "Durable Object answered HTTP {status}: {why}"
            )))
        }
    }
}

/// The object's answer to one request on a new stub; a superseded instance's HTTP 503 is
/// [`ObjectError::Retryable`].
async fn request_object(
    env: &Env,
    config: &Config,
    sender: &Address,
    method: Method,
    path: &str,
    body: Option<String>,
    headers: Headers,
) -> Result<Response, ObjectError> {
    let failed = |e: worker::Error| ObjectError::Failed(e.to_string());
    let stub = env
        .durable_object(SENDER_LOCK_BINDING)
        .and_then(|ns| ns.get_by_name(&config.object_name(&sender.to_string())))
        .map_err(failed)?;
    headers
        .set(SENDER_HEADER, &sender.to_string())
        .map_err(failed)?;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(JsValue::from_str(&body)));
    }
    let request =
        Request::new_with_init(&format!("https://sender-lock{path}"), &init).map_err(failed)?;
    let response = stub
        .fetch_with_request(request)
        .await
        .map_err(object_error)?;
    let superseded = response.status_code() == 503
        && response
            .headers()
            .has(wire::SUPERSEDED_HEADER)
            .unwrap_or(false);
    if superseded {
        return Err(ObjectError::Retryable(
            "the Durable Object instance was superseded".into(),
        ));
    }
    Ok(response)
}

impl Platform for WorkerBackend<'_> {
    async fn post(
        &self,
        body: &str,
        kind: CallKind,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.upstream.post(body, kind, timeout_ms).await
    }

    async fn post_read(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.upstream.post_read(body, kind, need, timeout_ms).await
    }

    async fn post_read_elsewhere(
        &self,
        body: &str,
        kind: CallKind,
        need: BlockNeed,
        timeout_ms: u64,
        not: usize,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.upstream
            .post_read_elsewhere(body, kind, need, timeout_ms, not)
            .await
    }

    async fn get_status(
        &self,
        hash: &TxHash,
        timeout_ms: u64,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.upstream.get_status(hash, timeout_ms).await
    }

    fn sends_to_private_route(&self) -> bool {
        self.upstream.sends_to_private_route()
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
        emit(
            self.env,
            crate::edge::runtime::chain_of(self.upstream.config),
            metric,
            self.upstream.request_id,
        );
    }
}

impl Backend for WorkerBackend<'_> {
    async fn send_in_order(
        &self,
        sender: &Address,
        chain_id: Option<u64>,
        txs: &[&SignedTx],
    ) -> Result<Vec<WireAnswer>, ObjectError> {
        let body = wire::encode_send(chain_id, txs);
        let text = call_object(
            self.env,
            self.upstream.config,
            sender,
            Method::Post,
            wire::SEND_PATH,
            Some(body),
            self.headers()?,
        )
        .await?;
        wire::decode_answers(&text, txs.len()).map_err(|e| ObjectError::Failed(e.to_string()))
    }

    async fn over_rate_limit(&self, sends: usize, reads: usize) -> bool {
        let (send, read) = futures_util::future::join(
            self.over(Bucket::Send, sends),
            self.over(Bucket::Read, reads),
        )
        .await;
        send || read
    }

    async fn over_key_budget(
        &self,
        sends: usize,
        reads: usize,
    ) -> Option<crate::access::keys::Refusal> {
        let hash = self.key.as_ref()?;
        let (sends, reads) = (sends as u64, reads as u64);
        let refused = crate::edge::keys::spend(self.env, hash, sends, reads)
            .await
            .err();
        self.emit(&crate::edge::keys::usage_metric(
            hash,
            sends,
            reads,
            refused.as_ref(),
        ));
        self.key_refused.replace(refused.clone());
        refused
    }

    /// The read upstreams' `eth_getLogs` range cap ([`crate::edge::race::log_range_cap`]).
    fn log_range_cap(&self) -> Option<u64> {
        crate::edge::race::log_range_cap(self.upstream.config)
    }

    /// The isolate's read cache ([`read_cache`]).
    fn read_cache(&self) -> Option<std::rc::Rc<std::cell::RefCell<crate::cache::ReadCache>>> {
        Some(read_cache(self.upstream.config))
    }

    /// Cloudflare's Cache API (`caches.default`: the data centre's; it works on a custom domain,
    /// not on `*.workers.dev`), a synthetic GET of this origin's `/__relay-cache/{key}`. Any
    /// failure is a miss.
    /// A promise this request creates, resolved by whichever request calls the wake: workerd
    /// runs its continuation in this request's I/O context
    /// (`handle_cross_request_promise_resolution`, on by default), where the waiter answers.
    fn signal(&self) -> Option<(crate::cache::flight::Wake, crate::relay::cached::Waiting)> {
        use futures_util::FutureExt;
        use std::cell::RefCell;
        use std::rc::Rc;
        let resolve: Rc<RefCell<Option<Function>>> = Rc::default();
        let slot = resolve.clone();
        let promise = Promise::new(&mut |ok, _| *slot.borrow_mut() = Some(ok));
        let wake = Box::new(move || {
            if let Some(ok) = resolve.borrow_mut().take() {
                let _ = ok.call0(&JsValue::NULL);
            }
        });
        let waiting = JsFuture::from(promise).map(|_| ());
        Some((wake, Box::pin(waiting)))
    }

    async fn shared_get(&self, key: &str) -> Option<String> {
        let url = self.shared_url(key)?;
        let mut response = worker::Cache::default().get(url, false).await.ok()??;
        response.text().await.ok()
    }

    /// Puts `result` in the Cache API as [`Backend::shared_get`] reads it, for 30 days
    /// (`s-maxage`; it holds for good, the data centre evicts it sooner when it needs the room).
    /// A failure is only logged.
    async fn shared_put(&self, key: &str, result: &str) {
        let Some(url) = self.shared_url(key) else {
            return;
        };
        let put = async {
            let headers = Headers::new();
            headers.set("content-type", "application/json")?;
            headers.set("cache-control", "public, s-maxage=2592000, max-age=2592000")?;
            let response = Response::ok(result)?.with_headers(headers);
            worker::Cache::default().put(url, response).await
        };
        if let Err(e) = put.await {
            emit(
                self.env,
                crate::edge::runtime::chain_of(self.upstream.config),
                &Metric::new("cache_error", "", "shared_put")
                    .value("count", 1.0)
                    .field("error", e.to_string()),
                self.upstream.request_id,
            );
        }
    }

    async fn tx_status(
        &self,
        sender: &Address,
        hash: &TxHash,
    ) -> Result<Option<String>, ObjectError> {
        let path = format!("{}{}", wire::TX_PREFIX, crate::hex::encode(hash));
        call_object_or_missing(
            self.env,
            self.upstream.config,
            sender,
            Method::Get,
            &path,
            self.headers()?,
        )
        .await
    }

    async fn cancel_private(
        &self,
        sender: &Address,
        hash: &TxHash,
    ) -> Result<WireAnswer, ObjectError> {
        let text = call_object(
            self.env,
            self.upstream.config,
            sender,
            Method::Post,
            wire::CANCEL_PATH,
            Some(wire::encode_cancel(hash)),
            self.headers()?,
        )
        .await?;
        WireAnswer::decode(&text)
            .ok_or_else(|| ObjectError::Failed("Durable Object answer: not an answer".into()))
    }

    async fn pending_count(&self, sender: &Address) -> Result<WireAnswer, ObjectError> {
        let text = call_object(
            self.env,
            self.upstream.config,
            sender,
            Method::Get,
            wire::PENDING_COUNT_PATH,
            None,
            self.headers()?,
        )
        .await?;
        WireAnswer::decode(&text)
            .ok_or_else(|| ObjectError::Failed("Durable Object answer: not an answer".into()))
    }
}
