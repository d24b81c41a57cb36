//! HTTP to the upstream node from the Worker and the Durable Object (wasm32 only): a POST with a
//! timeout, an answer size limit, and errors redacted of the upstream URL; and [`HttpUpstream`],
//! the core's [`Upstream`] over it.

use crate::config::Config;
use crate::metrics::Metric;
use crate::upstream::{check_upstream_body, Upstream, UpstreamError, UpstreamReply};
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{
    AbortController, Delay, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response,
};

async fn read_limited(
    mut response: Response,
    limit: usize,
) -> Result<UpstreamReply, UpstreamError> {
    let declared = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(UpstreamError::TooLarge(limit));
    }
    let status = response.status_code();
    let mut stream = response
        .stream()
        .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(body).map_err(|_| UpstreamError::Invalid)?;
    check_upstream_body(status, text)
}

/// POSTs `body` (JSON-RPC text) to `UPSTREAM_RPC_URL` and returns the answer (status and JSON
/// body).
///
/// # Errors
/// [`UpstreamError`]: unreachable (message redacted), non-JSON answer (with its HTTP status),
/// over `MAX_UPSTREAM_RESPONSE_BYTES`, or no complete answer within `timeout_ms`.
pub async fn post(
    config: &Config,
    body: &str,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let unreachable = |e: worker::Error| UpstreamError::Unreachable(config.redact(&e.to_string()));
    let headers = Headers::new();
    headers
        .set("content-type", "application/json")
        .map_err(unreachable)?;
    let mut init = RequestInit::new();
    // A redirect is not followed: it would send the request, keys and all, somewhere else. The
    // client gets "HTTP 30x".
    init.with_redirect(RequestRedirect::Manual);
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(JsValue::from_str(body)));
    let request = Request::new_with_init(&config.upstream_url, &init).map_err(unreachable)?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let exchange = Box::pin(async move {
        let response = Fetch::Request(request)
            .send_with_signal(&signal)
            .await
            .map_err(unreachable)?;
        let mut reply = read_limited(response, config.max_upstream_response_bytes).await?;
        // An answer that quotes the upstream's URL or key (some nodes echo them in errors) is
        // relayed without them.
        if let std::borrow::Cow::Owned(redacted) = config.redact_cow(&reply.body) {
            reply.body = redacted;
        }
        Ok(reply)
    });
    let timeout = Delay::from(Duration::from_millis(timeout_ms));
    match select(exchange, timeout).await {
        Either::Left((result, _)) => result.map_err(|e| match e {
            UpstreamError::Unreachable(why) => UpstreamError::Unreachable(config.redact(&why)),
            other => other,
        }),
        Either::Right(((), _)) => {
            controller.abort();
            Err(UpstreamError::Timeout(timeout_ms))
        }
    }
}

/// The upstream, the clock and the metrics of one Worker request or Durable Object call.
pub struct HttpUpstream<'a> {
    /// The settings (upstream URL, limits).
    pub config: &'a Config,
    /// The environment, for the metrics dataset.
    pub env: &'a worker::Env,
    /// The `X-Request-Id` of the request this work is for, added to its metrics.
    pub request_id: Option<&'a str>,
}

impl Upstream for HttpUpstream<'_> {
    async fn post(&self, body: &str, timeout_ms: u64) -> Result<UpstreamReply, UpstreamError> {
        post(self.config, body, timeout_ms).await
    }

    async fn sleep(&self, ms: u64) {
        Delay::from(Duration::from_millis(ms)).await;
    }

    fn now_ms(&self) -> u64 {
        crate::edge::platform::now_ms()
    }

    fn random(&self) -> f64 {
        worker::js_sys::Math::random()
    }

    fn emit(&self, metric: &Metric) {
        crate::edge::platform::emit(self.env, metric, self.request_id);
    }
}
