//! What a private route says of one transaction it was sent: its status endpoint
//! (`SEND_STATUS_URL`, a URL with `{hash}`), read into a [`RouteStatus`].
//!
//! The routes answer `GET <status url>` with a JSON object whose `status` is a word of their own
//! (sources in `docs/private-routes.md`, section 1):
//!
//! | route | pending | included | public | cancelled | failed | unknown |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | Flashbots Protect (`/tx/{hash}`) | `PENDING` | `INCLUDED` | | `CANCELLED` | `FAILED` | `UNKNOWN` |
//! | MEV Blocker (`/tx/{hash}`) | (none documented) | `INCLUDED` | | | `FAILED` | `UNKNOWN` |
//! | Merkle (`/transaction/{hash}`) | `pending`, `nonce_gapped` | `mined` | `in_public_mempool` | | `expired` and its refusals | `unknown` |
//! | Blink (`/tx/{hash}`) | `IN_AUCTION` | `ON_CHAIN` | `IN_MEMPOOL` | | | `UNKNOWN` (`UNKOWN` in its docs) |
//!
//! Merkle's refusals: `nonce_too_low`, `not_enough_funds`, `base_fee_low`, `low_priority_fee`,
//! `not_enough_gas`, `sanctioned`, `gas_limit_too_high`, `invalid_signature`, `underpriced`,
//! `reverting`. Words are matched without regard to case. A word none of them uses, or a body
//! without one, says nothing ([`RouteStatus::of_body`] is `None`).
//!
//! MEV Blocker documents no pending word, and answers a hash it never received with `UNKNOWN`
//! and a null `rpc_timestamp`: an `UNKNOWN` that carries the time the route received it
//! (MEV Blocker's `rpc_timestamp`, Blink's `rpcTimestampMs`, Merkle's `received_at`) is read as
//! pending, not as never received.

use crate::transaction::TxHash;
use serde_json::Value;

/// The most bytes of a status endpoint's answer the relay reads (64 KiB; Protect's is about
/// 1 KB): past it the answer says nothing.
pub const MAX_STATUS_BYTES: usize = 64 * 1024;

/// The longest one status `GET` may take, ms: a slow status endpoint must not hold the
/// tracking check (the read node's batch waits for the statuses) for a whole lookup's budget.
pub const STATUS_TIMEOUT_MS: u64 = 5_000;

/// The longest the route's statuses may take when a send waits for them, ms: a sender's object
/// that starts with nothing stored asks the route's status of the transactions waiting beside
/// its first nonce lookup (a cancel it cannot remember), and one not answered by then lets them
/// go, as `UNKNOWN` does.
pub const FIRST_SEND_STATUS_TIMEOUT_MS: u64 = 1_000;

/// The most transactions of one sender whose status one tracking check asks the route, lowest
/// nonces first (one `GET` each, at once, beside the check's batch to the read node). 4: with
/// the batch and the one send in flight behind a route, 6 fetches, Cloudflare's six connections
/// waiting for headers per Durable Object (more are queued by the platform; a check at
/// `upstream/lookup.rs` holds the sum). The lowest matter: one dropped holds those above it.
pub const MAX_STATUS_ASKED: usize = 4;

/// What a private route says of a transaction (see the module documentation for each route's
/// words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteStatus {
    /// Held, to be included: kept, not sent again.
    Pending,
    /// The route says it is in a block; the read node confirms it (it may lag): not sent again.
    Included,
    /// Released to the public mempool by the route itself: the read node can see it now; not
    /// sent again.
    Public,
    /// Cancelled by its sender (Protect's `CANCELLED`): final at once, never sent again (that
    /// would undo the cancel), not counted, its row deleted.
    Cancelled,
    /// Given up by the route (Protect and MEV Blocker `FAILED`, Merkle's refusals and
    /// `expired`): dropped, sent to the route again from its original bytes. Not final: Protect
    /// has included a transaction it had marked `FAILED` (flashbots/rpc-endpoint#95).
    Failed,
    /// The route does not know it: dropped (or never received), sent again.
    Unknown,
}

impl RouteStatus {
    /// The status a route's word means (any case); `None` for a word none of the routes uses.
    pub fn of_word(word: &str) -> Option<RouteStatus> {
        let word = word.to_ascii_lowercase();
        Some(match word.as_str() {
            "pending" | "nonce_gapped" | "in_auction" => RouteStatus::Pending,
            "included" | "mined" | "on_chain" => RouteStatus::Included,
            "in_public_mempool" | "in_mempool" => RouteStatus::Public,
            "cancelled" => RouteStatus::Cancelled,
            "failed" | "expired" | "nonce_too_low" | "not_enough_funds" | "base_fee_low"
            | "low_priority_fee" | "not_enough_gas" | "sanctioned" | "gas_limit_too_high"
            | "invalid_signature" | "underpriced" | "reverting" => RouteStatus::Failed,
            "unknown" | "unkown" => RouteStatus::Unknown,
            _ => return None,
        })
    }

    /// The status in a status endpoint's JSON answer (`{"status": "<word>", ...}`); `None` when
    /// the body is not such an object or its word is unknown.
    pub fn of_body(body: &str) -> Option<RouteStatus> {
        let answer: Value = serde_json::from_str(body).ok()?;
        let status = RouteStatus::of_word(answer.get("status")?.as_str()?)?;
        let received = ["rpc_timestamp", "rpcTimestampMs", "received_at"]
            .iter()
            .any(|field| answer.get(*field).is_some_and(|v| !v.is_null()));
        Some(match status {
            RouteStatus::Unknown if received => RouteStatus::Pending,
            status => status,
        })
    }

    /// Whether a status endpoint's answer (HTTP `status`, `body`) says the route knows the
    /// transaction: a 2xx with a status other than [`RouteStatus::Unknown`].
    pub fn knows(status: u16, body: &str) -> bool {
        (200..300).contains(&status)
            && RouteStatus::of_body(body).is_some_and(|s| s != RouteStatus::Unknown)
    }

    /// The sender a status endpoint's answer names: `transaction.from` (Flashbots Protect's
    /// status API), or a top-level `from`; `None` when it names none.
    pub fn sender_of_body(body: &str) -> Option<crate::address::Address> {
        let answer: Value = serde_json::from_str(body).ok()?;
        let from = answer
            .get("transaction")
            .and_then(|tx| tx.get("from"))
            .or_else(|| answer.get("from"))?;
        from.as_str()?.parse().ok()
    }

    /// Whether the route no longer holds it: sent to the route again.
    pub fn dropped(self) -> bool {
        matches!(self, RouteStatus::Failed | RouteStatus::Unknown)
    }

    /// Its name in `GET /tx/{hash}` (`route_status`) and in metrics: `pending`, `included`,
    /// `public`, `cancelled`, `failed`, `unknown`.
    pub fn label(self) -> &'static str {
        match self {
            RouteStatus::Pending => "pending",
            RouteStatus::Included => "included",
            RouteStatus::Public => "public",
            RouteStatus::Cancelled => "cancelled",
            RouteStatus::Failed => "failed",
            RouteStatus::Unknown => "unknown",
        }
    }
}

/// The status URL of `hash`: `template` (`SEND_STATUS_URL`) with `{hash}` replaced by the hash
/// as lowercase 0x hex (66 characters).
pub fn status_url(template: &str, hash: &TxHash) -> String {
    template.replace("{hash}", &crate::hex::encode(hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_routes_words() {
        let cases = [
            // Flashbots Protect
            ("PENDING", RouteStatus::Pending),
            ("INCLUDED", RouteStatus::Included),
            ("FAILED", RouteStatus::Failed),
            ("CANCELLED", RouteStatus::Cancelled),
            ("UNKNOWN", RouteStatus::Unknown),
            // Merkle
            ("pending", RouteStatus::Pending),
            ("nonce_gapped", RouteStatus::Pending),
            ("mined", RouteStatus::Included),
            ("in_public_mempool", RouteStatus::Public),
            ("expired", RouteStatus::Failed),
            ("base_fee_low", RouteStatus::Failed),
            ("nonce_too_low", RouteStatus::Failed),
            ("unknown", RouteStatus::Unknown),
            // Blink, with its docs' spelling
            ("IN_AUCTION", RouteStatus::Pending),
            ("ON_CHAIN", RouteStatus::Included),
            ("IN_MEMPOOL", RouteStatus::Public),
            ("UNKOWN", RouteStatus::Unknown),
        ];
        for (word, status) in cases {
            assert_eq!(RouteStatus::of_word(word), Some(status), "{word}");
        }
        assert_eq!(RouteStatus::of_word("SUBMITTED"), None);
        assert_eq!(RouteStatus::of_word(""), None);
    }

    #[test]
    fn only_failed_and_unknown_are_drops() {
        let dropped: Vec<&str> = [
            RouteStatus::Pending,
            RouteStatus::Included,
            RouteStatus::Public,
            RouteStatus::Cancelled,
            RouteStatus::Failed,
            RouteStatus::Unknown,
        ]
        .into_iter()
        .filter(|s| s.dropped())
        .map(RouteStatus::label)
        .collect();
        assert_eq!(dropped, ["failed", "unknown"]);
    }

    #[test]
    fn bodies_and_an_unknown_the_route_received() {
        let protect = r#"{"status":"FAILED","hash":"0x01","maxBlockNumber":20,"transaction":{},"seenInMempool":false,"simError":"SimErrorNonceTooHigh"}"#;
        assert_eq!(RouteStatus::of_body(protect), Some(RouteStatus::Failed));
        // MEV Blocker: never received, and received (it documents no pending word).
        let never = r#"{"status":"UNKNOWN","hash":"0x01","rpc_timestamp":null}"#;
        let received = r#"{"status":"UNKNOWN","hash":"0x01","rpc_timestamp":1700000000}"#;
        assert_eq!(RouteStatus::of_body(never), Some(RouteStatus::Unknown));
        assert_eq!(RouteStatus::of_body(received), Some(RouteStatus::Pending));
        for nothing in [
            "",
            "null",
            "[]",
            r#"{"status":7}"#,
            r#"{"state":"PENDING"}"#,
            r#"{"status":"QUEUED"}"#,
        ] {
            assert_eq!(RouteStatus::of_body(nothing), None, "{nothing}");
        }
    }

    #[test]
    fn the_hash_goes_where_the_template_says() {
        assert_eq!(
            status_url("https://protect.example/tx/{hash}?x=1", &[0xab; 32]),
            format!("https://protect.example/tx/0x{}?x=1", "ab".repeat(32))
        );
    }
}
