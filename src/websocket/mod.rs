//! JSON-RPC over WebSocket, independent of the platform: the per-connection limits, why the relay
//! closes a client's socket, and the connection's [`subscriptions`].
//!
//! A client's socket carries the same JSON-RPC 2.0 as an HTTP body, one request or batch per
//! message, answered by id, possibly out of request order (each message is answered when it is
//! done). Everything but `eth_subscribe` / `eth_unsubscribe` goes through the relay as over HTTP
//! ([`crate::relay::Relay::handle_message`]): method policy, rate limits, each sender's
//! transactions through its Durable Object. Subscriptions are served from the upstream's
//! WebSocket (`UPSTREAM_WS_URL`), with ids of the relay's own, so that they outlive the upstream
//! socket: when it drops, the relay reconnects and subscribes again under the same ids, and
//! fills in the `newHeads` and the [`logs`] the client missed meanwhile
//! ([`subscriptions::Subscriptions::lost`]).

pub mod backfill;
pub mod logs;
pub mod memory;
pub mod params;
pub mod subscriptions;

use crate::jsonrpc::{RpcError, LIMIT_EXCEEDED};

pub use crate::jsonrpc::notification::{notification_of, NOTIFICATION, SUBSCRIBE, UNSUBSCRIBE};

/// Whether `method` is served by the connection's subscriptions rather than over HTTP.
pub fn is_subscription(method: &str) -> bool {
    method == SUBSCRIBE || method == UNSUBSCRIBE
}

/// Each connection's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketLimits {
    /// `WS_MAX_SUBSCRIPTIONS` (default 100): the most subscriptions one connection holds.
    pub max_subscriptions: usize,
    /// `WS_MAX_MESSAGE_BYTES` (default 1000000): the largest message a client may send, bytes;
    /// below the runtime's own limit on a received message (1 MiB), so that the client gets an
    /// error it can read instead of a bare close.
    pub max_message_bytes: usize,
    /// `WS_IDLE_TIMEOUT_S` (default 600) in ms: a connection that neither sent a message nor was
    /// sent a notification for this long is closed.
    pub idle_timeout_ms: u64,
    /// `WS_UPSTREAM_RECONNECT_MS` (default 30000): how long the relay tries to get the upstream's
    /// WebSocket back, ms, before it closes the client's socket ([`Close::UpstreamLost`]).
    pub upstream_reconnect_ms: u64,
    /// `WS_MAX_CONNECTION_BYTES` (default 4194304, 4 MiB): what one connection may keep in the
    /// isolate's memory, bytes: its subscriptions' params, the logs remembered to deliver each
    /// once, notifications held during a gap's fill-in, and the messages being answered
    /// ([`memory`]).
    pub max_connection_bytes: usize,
    /// `WS_MAX_ISOLATE_BYTES` (default 33554432, 32 MiB, a quarter of a Worker isolate's 128 MB):
    /// what all of one isolate's connections together may keep, bytes ([`memory`]).
    pub max_isolate_bytes: usize,
}

impl Default for SocketLimits {
    fn default() -> Self {
        SocketLimits {
            max_subscriptions: 100,
            max_message_bytes: 1_000_000,
            idle_timeout_ms: 600_000,
            upstream_reconnect_ms: 30_000,
            max_connection_bytes: 4 << 20,
            max_isolate_bytes: 32 << 20,
        }
    }
}

/// Why the relay closes a client's socket. The client first gets [`Close::error`] (with id null),
/// then the close frame with [`Close::code`] and [`Close::reason`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Close {
    /// A message over `WS_MAX_MESSAGE_BYTES` (limit, bytes): 1009, message too big.
    TooBig(usize),
    /// An `eth_subscribe` over `WS_MAX_SUBSCRIPTIONS` (limit): 1008, policy violation.
    TooManySubscriptions(usize),
    /// Nothing sent or received for `WS_IDLE_TIMEOUT_S` (s): 1000, normal closure.
    Idle(u64),
    /// The upstream's WebSocket could not be reached again within `WS_UPSTREAM_RECONNECT_MS`
    /// (ms) while the connection had subscriptions: 1013, try again later. A client that
    /// reconnects and subscribes again gets a fresh upstream socket.
    UpstreamLost(u64),
    /// The connection's API key was refused at its lease (revoked, or its budget spent): 1008,
    /// policy violation; the key's refusal (its JSON-RPC `code` and `message`) is sent first.
    KeyRefused {
        /// The refusal's JSON-RPC code (-32016, -32005).
        code: i64,
        /// Its message.
        message: String,
    },
}

impl Close {
    /// The close code (RFC 6455 section 7.4.1; 1013 from IANA's WebSocket close code registry).
    pub fn code(&self) -> u16 {
        match self {
            Close::TooBig(_) => 1009,
            Close::TooManySubscriptions(_) | Close::KeyRefused { .. } => 1008,
            Close::Idle(_) => 1000,
            Close::UpstreamLost(_) => 1013,
        }
    }

    /// The close reason (at most 123 bytes, as a close frame allows).
    pub fn reason(&self) -> String {
        match self {
            Close::TooBig(limit) => format!("message exceeds {limit} bytes"),
            Close::TooManySubscriptions(limit) => format!("more than {limit} subscriptions"),
            Close::Idle(seconds) => format!("idle for {seconds} s"),
            Close::UpstreamLost(ms) => {
                format!("upstream WebSocket lost for {ms} ms; reconnect and subscribe again")
            }
            Close::KeyRefused { message, .. } => message.chars().take(100).collect(),
        }
    }

    /// The JSON-RPC error sent before the close (EIP-1474: -32005 limit exceeded for a broken
    /// limit, -32002 resource unavailable for a lost upstream).
    pub fn error(&self) -> RpcError {
        let code = match self {
            Close::UpstreamLost(_) => crate::jsonrpc::RESOURCE_UNAVAILABLE,
            Close::KeyRefused { code, .. } => *code,
            _ => LIMIT_EXCEEDED,
        };
        RpcError::new(code, format!("closing the connection: {}", self.reason()))
    }

    /// The error as the message to send: a response with id null.
    pub fn message(&self) -> String {
        self.error().response(&crate::jsonrpc::Id::null())
    }
}

/// The WebSocket URL of an HTTP upstream: `http://` becomes `ws://`, `https://` `wss://` (the
/// default of `UPSTREAM_WS_URL`; geth, reth, Nethermind, anvil and Hedera's relay serve both on
/// one URL or say otherwise in their docs). Any other URL is returned unchanged.
pub fn ws_url_of(http_url: &str) -> String {
    if let Some(rest) = http_url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = http_url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        http_url.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn close_reasons_fit_a_close_frame_and_name_the_limit() {
        for close in [
            Close::TooBig(1_000_000),
            Close::TooManySubscriptions(100),
            Close::Idle(600),
            Close::UpstreamLost(30_000),
        ] {
            assert!(close.reason().len() <= 123, "{}", close.reason());
            let message: Value = serde_json::from_str(&close.message()).unwrap();
            assert_eq!(message["id"], Value::Null);
            assert!(message["error"]["message"]
                .as_str()
                .unwrap()
                .ends_with(&close.reason()));
        }
        assert_eq!(Close::TooBig(5).code(), 1009);
        assert_eq!(Close::UpstreamLost(5).error().code, -32002);
    }

    #[test]
    fn the_upstream_ws_url_keeps_everything_but_the_scheme() {
        assert_eq!(
            ws_url_of("https://mainnet.example/v3/key?x=1"),
            "wss://mainnet.example/v3/key?x=1"
        );
        assert_eq!(ws_url_of("http://127.0.0.1:8545"), "ws://127.0.0.1:8545");
        assert_eq!(ws_url_of("wss://a.example"), "wss://a.example");
    }
}
