//! The upstream node as the pure core sees it: one HTTP answer ([`UpstreamReply`]) or the reason
//! there was none ([`UpstreamError`]), posted through the [`Platform`] (the whole platform: the upstream, a timer, the clock, randomness, metrics) (HTTP over
//! `fetch` in `edge/http.rs`; scripted peers in the native tests). [`submit`] sends one
//! transaction until it has a final answer, within the [`retry`] budget; [`batch`] sends several
//! of a window's at once; [`lookup`] asks about a sender in batches. Which of several upstreams a call goes to: [`route`] (each call's
//! [`CallKind`] and the [`route::RoutingTable`]), [`race`] (one call's race, a pure state machine)
//! and [`rotation`] (each upstream's health).

pub mod batch;
pub mod block_ref;
pub mod cancel;
pub mod heads;
pub mod logs;
pub mod lookup;
pub mod merge;
pub mod platform;
pub mod race;
pub mod retry;
pub mod rotation;
pub mod route;
pub mod submit;

pub use platform::Platform;

use crate::jsonrpc::{self, Answer, RpcError};
use crate::metrics::Metric;
use crate::ordering::answer::{classify_message, AnswerClass};
pub use route::CallKind;
use std::fmt;

/// A usable HTTP answer from the upstream: its status and a body that is JSON (checked by
/// [`check_upstream_body`]; it is the upstream's own JSON-RPC answer, errors included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamReply {
    /// The HTTP status, such as 200, or 429 with a JSON-RPC error body.
    pub status: u16,
    /// The JSON text, at most `MAX_UPSTREAM_RESPONSE_BYTES` bytes.
    pub body: String,
    /// The `Retry-After` header, ms (delay-seconds; see [`retry::parse_retry_after`]).
    pub retry_after_ms: Option<u64>,
    /// Which upstream gave it, when the platform says ([`Answerer`]).
    pub answerer: Option<Answerer>,
}

/// Which upstream of its chain's set (`UPSTREAM_RPC_URL`, in order) gave a reply, and its head
/// as the isolate knew it then ([`heads::Heads`]): the read cache asks a read again elsewhere
/// when that upstream may lack the block it asked about. For a send behind private routes, which
/// route (`UPSTREAM_SEND_URL`, in order): the object keeps it, and asks that route first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answerer {
    /// Its position in the chain's set (`route`: in the private routes').
    pub index: usize,
    /// Its head, block number, when known (never for a route).
    pub head: Option<u64>,
    /// Whether it is a private route.
    pub route: bool,
}

impl UpstreamReply {
    /// A 200 answer with `body` (tests and scripted peers).
    pub fn ok(body: impl Into<String>) -> Self {
        UpstreamReply {
            status: 200,
            body: body.into(),
            retry_after_ms: None,
            answerer: None,
        }
    }
}

/// Why the upstream gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamError {
    /// The request could not be made or got no response (connection refused, reset or lost,
    /// DNS). The platform's message, already redacted of the upstream URL.
    Unreachable(String),
    /// An HTTP status other than 2xx with a body that is not JSON, and its `Retry-After` in ms.
    Status(u16, Option<u64>),
    /// A body that is not JSON.
    Invalid,
    /// A body over `MAX_UPSTREAM_RESPONSE_BYTES`; the limit in bytes.
    TooLarge(usize),
    /// No answer within the timeout, in ms.
    Timeout(u64),
    /// Every upstream of the chain was found on another chain (its `eth_chainId`): the log's
    /// reason, which names no URL ("eth_chainId 31337, the relay's chain is 296"). Nothing was
    /// sent.
    OtherChain(String),
}

impl UpstreamError {
    /// A short name for logs and metrics: `unreachable`, `http_status`, `invalid`, `too_large`,
    /// `timeout`.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Unreachable(_) => "unreachable",
            UpstreamError::Status(..) => "http_status",
            UpstreamError::Invalid => "invalid",
            UpstreamError::TooLarge(_) => "too_large",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::OtherChain(_) => "other_chain",
        }
    }

    /// The JSON-RPC error code (EIP-1474): -32002 (resource unavailable) when the upstream could
    /// not be reached or did not answer, -32603 when its answer was unusable.
    pub fn code(&self) -> i64 {
        match self {
            UpstreamError::Unreachable(_)
            | UpstreamError::Status(..)
            | UpstreamError::Timeout(_)
            | UpstreamError::OtherChain(_) => jsonrpc::RESOURCE_UNAVAILABLE,
            UpstreamError::Invalid | UpstreamError::TooLarge(_) => jsonrpc::INTERNAL_ERROR,
        }
    }

    /// What went wrong, for a client, without the upstream's address.
    pub fn reason(&self) -> String {
        match self {
            UpstreamError::Unreachable(_) => "upstream unavailable: connection failed".into(),
            UpstreamError::Status(status, _) => format!("upstream unavailable: HTTP {status}"),
            UpstreamError::Invalid => "upstream returned an invalid JSON-RPC response".into(),
            UpstreamError::TooLarge(limit) => format!("upstream response exceeds {limit} bytes"),
            UpstreamError::Timeout(ms) => format!("upstream did not answer within {ms} ms"),
            UpstreamError::OtherChain(why) => {
                format!("upstream unavailable: it serves another chain ({why})")
            }
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

/// Checks an upstream answer: HTTP status, body (already bounded by the size limit) and its
/// `Retry-After` (ms).
///
/// # Errors
/// [`UpstreamError::Invalid`] for a body that is not JSON (or [`UpstreamError::Status`] when the
/// status was not 2xx). A JSON body is a [`UpstreamReply`] whatever the status: it is the
/// upstream's own JSON-RPC answer, errors included, and is relayed unchanged.
pub fn check_upstream_body(
    status: u16,
    body: String,
    retry_after_ms: Option<u64>,
) -> Result<UpstreamReply, UpstreamError> {
    match serde_json::from_str::<&serde_json::value::RawValue>(&body) {
        Ok(_) => Ok(UpstreamReply {
            status,
            body,
            retry_after_ms,
            answerer: None,
        }),
        Err(_) if !(200..300).contains(&status) => {
            Err(UpstreamError::Status(status, retry_after_ms))
        }
        Err(_) => Err(UpstreamError::Invalid),
    }
}

impl UpstreamError {
    /// The `Retry-After` the upstream sent with a non-JSON error status, ms.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            UpstreamError::Status(_, retry_after_ms) => *retry_after_ms,
            _ => None,
        }
    }

    /// Whether the request may have reached the node although no answer came: a lost
    /// connection, a timeout, an answer that was cut or unusable, a gateway's 5xx. Not when the
    /// connection was refused (nothing was sent), nor for HTTP 429 or 503 (the service turned the
    /// request away) or another 4xx. A transaction whose send may have arrived has an unknown
    /// outcome: it is looked up by hash before anything is concluded about it.
    pub fn may_have_arrived(&self) -> bool {
        match self {
            UpstreamError::Unreachable(why) => !refused(why),
            UpstreamError::Status(status, _) => !matches!(status, 400..=499 | 503),
            UpstreamError::Invalid | UpstreamError::TooLarge(_) | UpstreamError::Timeout(_) => true,
            UpstreamError::OtherChain(_) => false,
        }
    }
}

/// Whether a reply that said nothing about a request may still have let it reach the node: a
/// transport failure that may have arrived ([`UpstreamError::may_have_arrived`]), or a gateway's
/// HTTP 502/504; not a node's JSON-RPC answer (a busy node did not take it), nor HTTP 429/503.
pub fn may_have_arrived(reply: &Result<UpstreamReply, UpstreamError>) -> bool {
    match reply {
        Err(e) => e.may_have_arrived(),
        Ok(r) => matches!(r.status, 502 | 504),
    }
}

/// Whether a platform error message says the connection was refused or never opened (nothing was
/// sent): `ECONNREFUSED`, "connection refused", a DNS failure.
fn refused(why: &str) -> bool {
    let why = why.to_ascii_lowercase();
    ["econnrefused", "connection refused", "enotfound", "dns"]
        .iter()
        .any(|p| why.contains(p))
}

/// The class of the upstream's answer to one `eth_sendRawTransaction` ([`AnswerClass`]), with the
/// [`Answer`] parsed from it (`None` when there was no usable one): no answer, or HTTP
/// 429/502/503/504 whatever the body ([`retry::RETRYABLE_STATUSES`]), is `Unavailable`; a result
/// is `Accepted`; an error is classed by its message ([`classify_message`]), and one no pattern
/// knows with a limit code ([`LIMIT_CODES`]) is `Busy`.
pub fn classify(reply: &Result<UpstreamReply, UpstreamError>) -> (AnswerClass, Option<Answer>) {
    let reply = match reply {
        Err(UpstreamError::TooLarge(_)) => return (AnswerClass::Unrecognized, None),
        Err(_) => return (AnswerClass::Unavailable, None),
        Ok(reply) => reply,
    };
    if retry::RETRYABLE_STATUSES.contains(&reply.status) {
        return (AnswerClass::Unavailable, Answer::parse(&reply.body));
    }
    let Some(answer) = Answer::parse(&reply.body) else {
        // JSON, but not one response object: nothing to believe.
        return (AnswerClass::Unrecognized, None);
    };
    let class = match &answer {
        Answer::Result(raw) if raw != "null" => AnswerClass::Accepted,
        Answer::Result(_) => AnswerClass::Unrecognized,
        Answer::Error(_) => {
            answer
                .error_parts()
                .map_or(
                    AnswerClass::Unrecognized,
                    |(code, message)| match classify_message(&message) {
                        AnswerClass::Unrecognized if LIMIT_CODES.contains(&code) => {
                            AnswerClass::Busy
                        }
                        class => class,
                    },
                )
        }
    };
    (class, Some(answer))
}

/// JSON-RPC error codes that say a limit was reached, whatever their text: EIP-1474's -32005
/// (limit exceeded), QuickNode's -32007 (request limit reached) and 429 (providers that put the
/// HTTP status in the code). An error with one of them and a text no pattern knows is
/// [`AnswerClass::Busy`]; a text a pattern knows keeps its class (Besu's -32005 `Transaction gas
/// limit exceeds block gas limit` is a refusal).
pub const LIMIT_CODES: [i64; 3] = [-32005, -32007, 429];

/// The metric for an upstream failure seen by `method` (label: the error's kind).
pub fn error_metric(method: &str, error: &UpstreamError) -> Metric {
    Metric::new("upstream_error", "", error.kind())
        .value("count", 1.0)
        .field("method", method)
        .field("error", error.to_string())
}

/// Whether `reply` says the upstream does not serve the method: JSON-RPC -32601 (EIP-1474;
/// geth's "the method … does not exist/is not available"), or an HTTP 404 or 405.
pub fn method_not_served(reply: &Result<UpstreamReply, UpstreamError>) -> bool {
    match reply {
        Err(UpstreamError::Status(404 | 405, _)) => true,
        Err(_) => false,
        Ok(r) if matches!(r.status, 404 | 405) => true,
        Ok(r) => Answer::parse(&r.body)
            .and_then(|a| a.error_parts())
            .is_some_and(|(code, _)| code == jsonrpc::METHOD_NOT_FOUND),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_code_with_a_text_no_pattern_knows_is_busy() {
        let error = |code: i64, message: &str| {
            Ok(UpstreamReply::ok(format!(
                r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"{message}"}}}}"#
            )))
        };
        for code in LIMIT_CODES {
            assert_eq!(classify(&error(code, "slow down")).0, AnswerClass::Busy);
        }
        assert_eq!(
            classify(&error(-32000, "slow down")).0,
            AnswerClass::Unrecognized
        );
        assert_eq!(
            classify(&error(
                -32005,
                "Transaction gas limit exceeds block gas limit"
            ))
            .0,
            AnswerClass::Rejected,
            "Besu's -32005 refusal keeps its class"
        );
    }

    #[test]
    fn transport_and_http_answers() {
        let reply = |status: u16, body: &str| {
            Ok(UpstreamReply {
                status,
                body: body.into(),
                retry_after_ms: None,
                answerer: None,
            })
        };
        let class = |r| classify(&r).0;
        assert_eq!(
            class(reply(200, r#"{"id":1,"result":"0xab"}"#)),
            AnswerClass::Accepted
        );
        assert_eq!(
            class(reply(200, r#"{"id":1,"result":null}"#)),
            AnswerClass::Unrecognized
        );
        assert_eq!(
            class(reply(200, r#"[{"id":1,"result":"0xab"}]"#)),
            AnswerClass::Unrecognized
        );
        for status in retry::RETRYABLE_STATUSES {
            assert_eq!(
                class(reply(
                    status,
                    r#"{"id":1,"error":{"code":-32005,"message":"slow down"}}"#
                )),
                AnswerClass::Unavailable
            );
        }
        assert_eq!(
            class(reply(
                500,
                r#"{"id":1,"error":{"code":-32000,"message":"already known"}}"#
            )),
            AnswerClass::AlreadyKnown
        );
        assert_eq!(
            class(reply(
                200,
                r#"{"id":1,"error":{"code":-32010,"message":"rejected","data":"OldNonce"}}"#
            )),
            AnswerClass::NonceTooLow
        );
        for e in [
            UpstreamError::Unreachable("Network connection lost".into()),
            UpstreamError::Status(503, None),
            UpstreamError::Invalid,
            UpstreamError::Timeout(100),
        ] {
            assert_eq!(class(Err(e)), AnswerClass::Unavailable);
        }
        assert_eq!(
            class(Err(UpstreamError::TooLarge(10))),
            AnswerClass::Unrecognized
        );
    }

    #[test]
    fn json_bodies_are_answers_whatever_the_status() {
        let reply = check_upstream_body(429, r#"{"error":{}}"#.into(), Some(2_000)).unwrap();
        assert_eq!((reply.status, reply.retry_after_ms), (429, Some(2_000)));
        let error = check_upstream_body(503, "<html>".into(), Some(1_000)).unwrap_err();
        assert_eq!(error, UpstreamError::Status(503, Some(1_000)));
        assert_eq!(error.retry_after_ms(), Some(1_000));
        assert_eq!(
            check_upstream_body(200, "nope".into(), None),
            Err(UpstreamError::Invalid)
        );
    }
}
