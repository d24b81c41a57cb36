//! HTTP to the upstream node from the Worker and the Durable Object (wasm32 only): a POST with a
//! timeout, an answer size limit, and errors redacted of the upstream URL (the transport that
//! [`crate::edge::race`] uses).

use crate::config::Config;
use crate::edge::runtime::whole_text;
use crate::upstream::retry::parse_retry_after;
use crate::upstream::{check_upstream_body, UpstreamError, UpstreamReply};
use futures_util::StreamExt;
use worker::js_sys::{self, Function, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Response};

fn js_error(e: JsValue) -> String {
    e.as_string()
        .or_else(|| {
            Reflect::get(&e, &JsValue::from_str("message"))
                .ok()
                .and_then(|m| m.as_string())
        })
        .unwrap_or_else(|| format!("{e:?}"))
}

/// Reads the answer's body within `limit` bytes: in one `text()` call when its length is declared
/// (nodes declare it), otherwise as a stream, counting.
async fn read_limited(
    response: web_sys::Response,
    limit: usize,
) -> Result<UpstreamReply, UpstreamError> {
    let lost = |e: JsValue| UpstreamError::Unreachable(js_error(e));
    let status = response.status();
    let retry_after_ms = response
        .headers()
        .get("retry-after")
        .ok()
        .flatten()
        .and_then(|v| parse_retry_after(&v));
    let declared = response
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(UpstreamError::TooLarge(limit));
    }
    if declared.is_some() {
        let text = whole_text(&response).await.map_err(lost)?;
        return check_upstream_body(status, text, retry_after_ms);
    }
    let mut response = Response::from(response);
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
    check_upstream_body(status, text, retry_after_ms)
}

/// `AbortSignal.timeout(ms)`: a signal the runtime aborts after `ms`, with no timer of ours.
fn timeout_signal(ms: u64) -> Result<web_sys::AbortSignal, JsValue> {
    let class = Reflect::get(&js_sys::global(), &JsValue::from_str("AbortSignal"))?;
    let timeout: Function = Reflect::get(&class, &JsValue::from_str("timeout"))?.dyn_into()?;
    Ok(timeout
        .call1(&class, &JsValue::from_f64(ms as f64))?
        .unchecked_into())
}

/// POSTs `body` (JSON-RPC text) to `url` (one of `UPSTREAM_RPC_URL`) and returns the answer (status and JSON
/// body), redacted of the upstream's URL and key (some nodes echo them in errors). The whole
/// exchange, answer included, is bounded by `timeout_ms` through the request's abort signal
/// (`AbortSignal.timeout`). A redirect is not followed: it would send the request, keys and all,
/// somewhere else; the client gets "HTTP 30x".
///
/// # Errors
/// [`UpstreamError`]: unreachable (message redacted), non-JSON answer (with its HTTP status),
/// over `MAX_UPSTREAM_RESPONSE_BYTES`, or no complete answer within `timeout_ms`.
pub async fn post_url(
    config: &Config,
    url: &str,
    body: &str,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    fetch_url(
        config,
        url,
        Some(body),
        config.max_upstream_response_bytes,
        timeout_ms,
    )
    .await
}

/// GETs `url` (a private route's status URL, `SEND_STATUS_URL`) as [`post_url`] posts: JSON, at
/// most `limit` bytes, within `timeout_ms`, redacted, no redirect followed.
///
/// # Errors
/// As [`post_url`]'s, with `limit` for the size.
pub async fn get_url(
    config: &Config,
    url: &str,
    limit: usize,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    fetch_url(config, url, None, limit, timeout_ms).await
}

/// A POST of `body` (a GET without one) to `url`; see [`post_url`].
async fn fetch_url(
    config: &Config,
    url: &str,
    body: Option<&str>,
    limit: usize,
    timeout_ms: u64,
) -> Result<UpstreamReply, UpstreamError> {
    let unreachable = |e: JsValue| UpstreamError::Unreachable(config.redact(&js_error(e)));
    let signal = timeout_signal(timeout_ms).map_err(unreachable)?;
    let headers = web_sys::Headers::new().map_err(unreachable)?;
    let init = web_sys::RequestInit::new();
    match body {
        Some(body) => {
            headers
                .set("content-type", "application/json")
                .map_err(unreachable)?;
            init.set_method("POST");
            init.set_body(&JsValue::from_str(body));
        }
        None => {
            headers
                .set("accept", "application/json")
                .map_err(unreachable)?;
            init.set_method("GET");
        }
    }
    init.set_headers(&headers);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    init.set_signal(Some(&signal));
    let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let result = async {
        let response: web_sys::Response = JsFuture::from(scope.fetch_with_str_and_init(url, &init))
            .await
            .map_err(unreachable)?
            .unchecked_into();
        read_limited(response, limit).await
    }
    .await;
    match result {
        Ok(mut reply) => {
            if let std::borrow::Cow::Owned(redacted) = config.redact_cow(&reply.body) {
                reply.body = redacted;
            }
            Ok(reply)
        }
        Err(_) if signal.aborted() => Err(UpstreamError::Timeout(timeout_ms)),
        Err(UpstreamError::Unreachable(why)) => {
            Err(UpstreamError::Unreachable(config.redact(&why)))
        }
        Err(other) => Err(other),
    }
}
