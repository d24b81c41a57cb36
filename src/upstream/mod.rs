//! The upstream node as the pure core sees it: one HTTP answer ([`UpstreamReply`]) or the reason
//! there was none ([`UpstreamError`]), and the [`Upstream`] trait the platform implements (HTTP
//! over `fetch` in `edge/upstream.rs`; scripted peers in the native tests). [`submit`] sends one
//! transaction until it has a final answer, within the [`retry`] budget.

pub mod retry;
pub mod submit;

use crate::jsonrpc::{self, RpcError};
use crate::metrics::Metric;
use std::fmt;

/// A usable HTTP answer from the upstream: its status and a body that is JSON (checked by
/// [`check_upstream_body`]; it is the upstream's own JSON-RPC answer, errors included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamReply {
    /// The HTTP status, such as 200, or 429 with a JSON-RPC error body.
    pub status: u16,
    /// The JSON text, at most `MAX_UPSTREAM_RESPONSE_BYTES` bytes.
    pub body: String,
}

impl UpstreamReply {
    /// A 200 answer with `body` (tests and scripted peers).
    pub fn ok(body: impl Into<String>) -> Self {
        UpstreamReply {
            status: 200,
            body: body.into(),
        }
    }
}

/// Why the upstream gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// The request could not be made or got no response (connection refused, reset or lost,
    /// DNS). The platform's message, already redacted of the upstream URL.
    Unreachable(String),
    /// An HTTP status other than 2xx with a body that is not JSON.
    Status(u16),
    /// A body that is not JSON.
    Invalid,
    /// A body over `MAX_UPSTREAM_RESPONSE_BYTES`; the limit in bytes.
    TooLarge(usize),
    /// No answer within the timeout, in ms.
    Timeout(u64),
}

impl UpstreamError {
    /// A short name for logs and metrics: `unreachable`, `http_status`, `invalid`, `too_large`,
    /// `timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Unreachable(_) => "unreachable",
            UpstreamError::Status(_) => "http_status",
            UpstreamError::Invalid => "invalid",
            UpstreamError::TooLarge(_) => "too_large",
            UpstreamError::Timeout(_) => "timeout",
        }
    }

    /// The JSON-RPC error code (EIP-1474): -32002 (resource unavailable) when the upstream could
    /// not be reached or did not answer, -32603 when its answer was unusable.
    pub fn code(&self) -> i64 {
        match self {
            UpstreamError::Unreachable(_)
            | UpstreamError::Status(_)
            | UpstreamError::Timeout(_) => jsonrpc::RESOURCE_UNAVAILABLE,
            UpstreamError::Invalid | UpstreamError::TooLarge(_) => jsonrpc::INTERNAL_ERROR,
        }
    }

    /// What went wrong, for a client, without the upstream's address.
    pub fn reason(&self) -> String {
        match self {
            UpstreamError::Unreachable(_) => "upstream unavailable: connection failed".into(),
            UpstreamError::Status(status) => format!("upstream unavailable: HTTP {status}"),
            UpstreamError::Invalid => "upstream returned an invalid JSON-RPC response".into(),
            UpstreamError::TooLarge(limit) => format!("upstream response exceeds {limit} bytes"),
            UpstreamError::Timeout(ms) => format!("upstream did not answer within {ms} ms"),
        }
    }

    /// The JSON-RPC error a client gets for a request that was sent on: [`Self::code`] and
    /// [`Self::reason`]; a timeout adds that a transaction may still be processed.
    pub fn to_rpc(&self) -> RpcError {
        let reason = self.reason();
        let message = match self {
            UpstreamError::Timeout(_) => format!("{reason}; a transaction may still be processed"),
            _ => reason,
        };
        RpcError::new(self.code(), message)
    }
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Unreachable(why) => write!(f, "unreachable: {why}"),
            other => write!(f, "{}", other.to_rpc().message),
        }
    }
}

/// Checks an upstream answer: HTTP status and body (already bounded by the size limit).
///
/// # Errors
/// [`UpstreamError::Invalid`] for a body that is not JSON (or [`UpstreamError::Status`] when the
/// status was not 2xx). A JSON body is a [`UpstreamReply`] whatever the status: it is the
/// upstream's own JSON-RPC answer, errors included, and is relayed unchanged.
pub fn check_upstream_body(status: u16, body: String) -> Result<UpstreamReply, UpstreamError> {
    match serde_json::from_str::<&serde_json::value::RawValue>(&body) {
        Ok(_) => Ok(UpstreamReply { status, body }),
        Err(_) if !(200..300).contains(&status) => Err(UpstreamError::Status(status)),
        Err(_) => Err(UpstreamError::Invalid),
    }
}

/// The upstream node and the clock, as the platform provides them: what sending a transaction
/// with retries ([`crate::upstream::submit`]) needs.
#[allow(async_fn_in_trait)] // single-threaded wasm: no Send bound wanted
pub trait Upstream {
    /// POSTs one JSON-RPC request (or batch) text to the upstream, waiting at most `timeout_ms`
    /// for the whole answer, and returns it checked with [`check_upstream_body`].
    async fn post(&self, body: &str, timeout_ms: u64) -> Result<UpstreamReply, UpstreamError>;

    /// Waits `ms` milliseconds on a timer of this request's own.
    async fn sleep(&self, ms: u64);

    /// The time, Unix ms.
    fn now_ms(&self) -> u64;

    /// A random number in [0, 1), for backoff jitter.
    fn random(&self) -> f64;

    /// Records one operator metric (a log line, and a data point where a dataset is bound).
    fn emit(&self, metric: &Metric);
}

/// The metric for an upstream failure seen by `method` (label: the error's kind).
pub fn error_metric(method: &str, error: &UpstreamError) -> Metric {
    Metric::new("upstream_error", "", error.kind())
        .value("count", 1.0)
        .field("method", method)
        .field("error", error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_bodies_are_answers_whatever_the_status() {
        let reply = check_upstream_body(429, r#"{"error":{}}"#.into()).unwrap();
        assert_eq!(reply.status, 429);
        assert_eq!(
            check_upstream_body(502, "<html>".into()),
            Err(UpstreamError::Status(502))
        );
        assert_eq!(
            check_upstream_body(200, "nope".into()),
            Err(UpstreamError::Invalid)
        );
    }
}
