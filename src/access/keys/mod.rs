//! API keys for a published endpoint (pure): a key's text and hash ([`key`]), what it may do
//! ([`scope`]), its budgets and the leases its Durable Object hands isolates ([`budget`]), and
//! its record as the admin API writes it to Workers KV and its object keeps it ([`KeyRecord`]).
//! The refusals' codes: an unknown, revoked or malformed key HTTP 401 with -32016 (eRPC's
//! "unauthorized"), never served as anonymous; out of scope -32002 (Infura's "rejected due to
//! project ID settings"), per batch member; over budget HTTP 429 with -32005 (EIP-1474 "limit
//! exceeded") and the reset time in `data`.

pub mod authority;
pub mod budget;
pub mod key;
pub mod scope;

use crate::jsonrpc::{self, RpcError};
use budget::Quota;
use scope::{OutOfScope, Scope};
use serde::{Deserialize, Serialize};

/// JSON-RPC error code of a request whose key is unknown, revoked or malformed (eRPC's).
pub const UNAUTHORIZED: i64 = -32016;

/// JSON-RPC error code of a member out of its key's scope (Infura's).
pub const REJECTED_BY_KEY: i64 = -32002;

/// Why a request is refused for its key as a whole (a member out of scope is refused alone, by
/// the relay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Something in a key's place that is no key.
    Malformed(key::Malformed),
    /// No such key.
    Unknown,
    /// The key was revoked.
    Revoked,
    /// No key, where `KEYLESS` says one is needed.
    NoKey,
    /// The key's daily or monthly budget is spent until `reset_ms` (ms since the epoch); the
    /// refusal was made at `now_ms`.
    OverBudget {
        /// When the budget starts again.
        reset_ms: u64,
        /// When the refusal was made.
        now_ms: u64,
    },
    /// The key cannot be checked now (KV or its object unreachable): closed.
    Unavailable,
    /// The request (its chain, origin or IP) is out of the key's scope.
    OutOfScope(OutOfScope),
}

impl Refusal {
    /// The HTTP status: 401 for a key that is no key's, 429 over budget, 503 unavailable, 403
    /// out of scope.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Malformed(_) | Refusal::Unknown | Refusal::Revoked | Refusal::NoKey => 401,
            Refusal::OverBudget { .. } => 429,
            Refusal::Unavailable => 503,
            Refusal::OutOfScope(_) => 403,
        }
    }

    /// Seconds until the budget starts again (over budget only), for `Retry-After`, at most an
    /// hour: a client told to wait a day would rather be told again.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            Refusal::OverBudget { reset_ms, now_ms } => Some(
                reset_ms
                    .saturating_sub(*now_ms)
                    .div_ceil(1_000)
                    .clamp(1, 3_600),
            ),
            _ => None,
        }
    }

    /// The JSON-RPC error: -32016 for a key that is no key's, -32005 over budget (its reset in
    /// `data.reset_ms`), -32002 unavailable or out of scope (`data.scope`).
    pub fn error(&self) -> RpcError {
        match self {
            Refusal::Malformed(why) => RpcError::new(UNAUTHORIZED, why.to_string()),
            Refusal::Unknown => RpcError::new(UNAUTHORIZED, "unauthorized: unknown API key"),
            Refusal::Revoked => RpcError::new(UNAUTHORIZED, "unauthorized: revoked API key"),
            Refusal::NoKey => RpcError::new(UNAUTHORIZED, "unauthorized: an API key is required"),
            Refusal::OverBudget { reset_ms, now_ms } => RpcError {
                data: Some(serde_json::json!({
                    "reset_ms": reset_ms,
                    "reset_in_s": reset_ms.saturating_sub(*now_ms).div_ceil(1_000),
                })),
                ..RpcError::new(jsonrpc::LIMIT_EXCEEDED, "the API key's budget is spent")
            },
            Refusal::Unavailable => RpcError::new(
                jsonrpc::RESOURCE_UNAVAILABLE,
                "the API key cannot be checked now; try again",
            ),
            Refusal::OutOfScope(why) => why.error(),
        }
    }
}

/// Who may use the endpoint without a key (`KEYLESS`), where keys are on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Keyless {
    /// Anyone, as without keys (the default).
    #[default]
    Open,
    /// Reads only: a send without a key gets HTTP 401, -32016.
    Reads,
    /// No one: every request without a key gets HTTP 401, -32016.
    Closed,
}

/// One key as the admin API writes it (KV `key/v1/{hash}`) and its object keeps it: never the
/// key itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyRecord {
    /// The key's id ([`key::KeyHash::id`]).
    pub id: String,
    /// The operator's name for it (`"dapp frontend"`), at most 200 characters.
    pub label: String,
    /// When it was made, ms since the epoch.
    pub created_ms: u64,
    /// Revoked: refused (HTTP 401) from the next lease on.
    pub revoked: bool,
    /// What it may do.
    pub scope: Scope,
    /// Its budgets.
    pub quota: Quota,
    /// Its rate-limit tier: the bindings `RATE_LIMIT_SEND_{TIER}` and `RATE_LIMIT_READ_{TIER}`
    /// count its requests, keyed by its id ([`crate::access::rate_limit::binding_name`]); `None`:
    /// the deployment's `RATE_LIMIT_SEND` and `RATE_LIMIT_READ`, keyed by its id. A tier whose
    /// binding is gone (a later deploy) counts on the deployment's.
    pub tier: Option<String>,
    /// What becomes of its sends behind a private route ([`Publish`]).
    pub publish: Publish,
}

/// What becomes of a key's sends behind a private route (`UPSTREAM_SEND_URL`): each goes to the
/// route, and may go to the public mempool when the route has not had it included after some
/// blocks ([`crate::ordering::private_terms`], at most the operator's
/// `SEND_PUBLIC_AFTER_BLOCKS`). Serialized as `"client"`, `"never"` or `{"after_blocks": N}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Publish {
    /// The client's choice, as without a key: its URL's `?public_after_blocks=N` (the default).
    #[default]
    Client,
    /// Never published, whatever the URL asks (a key for order flow that must stay private).
    Never,
    /// Published after `N` blocks (N at least 1), whatever the URL asks.
    AfterBlocks(u64),
}

impl Publish {
    /// The opt-in a send with this key carries, given the client's (`?public_after_blocks=N`):
    /// the client's, none, or the key's.
    pub fn opt_in(self, client: Option<u64>) -> Option<u64> {
        match self {
            Publish::Client => client,
            Publish::Never => None,
            Publish::AfterBlocks(n) => Some(n),
        }
    }
}

/// What the admin API takes to make or change a key: a label, a scope and a quota, each
/// optional (a change leaves what it does not name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeyChange {
    /// [`KeyRecord::label`].
    pub label: Option<String>,
    /// [`KeyRecord::scope`].
    pub scope: Option<Scope>,
    /// [`KeyRecord::quota`].
    pub quota: Option<Quota>,
    /// [`KeyRecord::revoked`] (`true` revokes; a revoked key is not restored by `false`).
    pub revoked: Option<bool>,
    /// [`KeyRecord::tier`]; `""` puts the key back on the deployment's bindings.
    pub tier: Option<String>,
    /// [`KeyRecord::publish`].
    pub publish: Option<Publish>,
}

impl KeyChange {
    /// Reads a change from the admin API's JSON body: its error in words.
    pub fn parse(body: &[u8]) -> Result<KeyChange, String> {
        let change: KeyChange = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        if change
            .label
            .as_ref()
            .is_some_and(|l| l.chars().count() > 200)
        {
            return Err("label: at most 200 characters".into());
        }
        if let Some(tier) = change.tier.as_deref().filter(|t| !t.is_empty()) {
            if !crate::access::rate_limit::tier_name_ok(tier) {
                return Err(format!(
                    "tier: 1 to {} of a-z, 0-9 and _, got {tier:?}",
                    crate::access::rate_limit::TIER_MAX_CHARS
                ));
            }
        }
        if change.publish == Some(Publish::AfterBlocks(0)) {
            return Err("publish: after_blocks is at least 1".into());
        }
        Ok(change)
    }

    /// `record` with this change made.
    pub fn apply(self, mut record: KeyRecord) -> KeyRecord {
        if let Some(label) = self.label {
            record.label = label;
        }
        if let Some(scope) = self.scope {
            record.scope = scope;
        }
        if let Some(quota) = self.quota {
            record.quota = quota;
        }
        if let Some(tier) = self.tier {
            record.tier = (!tier.is_empty()).then_some(tier);
        }
        if let Some(publish) = self.publish {
            record.publish = publish;
        }
        record.revoked |= self.revoked.unwrap_or(false);
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_status_and_code() {
        let over = Refusal::OverBudget {
            reset_ms: 90_000_500,
            now_ms: 500,
        };
        assert_eq!((over.status(), over.error().code), (429, -32005));
        assert_eq!(over.retry_after_s(), Some(3_600), "at most an hour");
        assert_eq!(over.error().data.unwrap()["reset_in_s"], 90_000);
        for unauthorized in [Refusal::Unknown, Refusal::Revoked, Refusal::NoKey] {
            assert_eq!(
                (unauthorized.status(), unauthorized.error().code),
                (401, -32016)
            );
        }
        let chain = Refusal::OutOfScope(OutOfScope::Chain(10));
        assert_eq!((chain.status(), chain.error().code), (403, -32002));
        assert_eq!(Refusal::Unavailable.status(), 503);
    }

    #[test]
    fn a_change_names_what_it_changes_and_revoking_is_for_good() {
        let record = KeyRecord {
            id: "k_0123456789abcdef".into(),
            label: "bot".into(),
            ..KeyRecord::default()
        };
        let change =
            KeyChange::parse(br#"{"quota":{"per_day":1000},"scope":{"chains":[1]}}"#).unwrap();
        let changed = change.apply(record.clone());
        assert_eq!(changed.label, "bot");
        assert_eq!(changed.quota.per_day, Some(1000));
        assert_eq!(changed.scope.chains, vec![1]);
        let revoked = KeyChange::parse(br#"{"revoked":true}"#)
            .unwrap()
            .apply(changed);
        assert!(revoked.revoked);
        assert!(
            KeyChange::parse(br#"{"revoked":false}"#)
                .unwrap()
                .apply(revoked)
                .revoked
        );
        assert!(
            KeyChange::parse(br#"{"scope":{"chain":[1]}}"#).is_err(),
            "unknown fields refused"
        );
        assert!(KeyChange::parse(br#"{"scope":{"contracts":["0x12"]}}"#).is_err());
    }

    #[test]
    fn a_key_names_its_tier_and_what_becomes_of_its_private_sends() {
        let pro = KeyChange::parse(br#"{"tier":"pro","publish":{"after_blocks":3}}"#)
            .unwrap()
            .apply(KeyRecord::default());
        assert_eq!(pro.tier.as_deref(), Some("pro"));
        assert_eq!(pro.publish, Publish::AfterBlocks(3));
        assert_eq!(
            pro.publish.opt_in(None),
            Some(3),
            "the key's, whatever the URL"
        );
        assert_eq!(pro.publish.opt_in(Some(10)), Some(3));
        let back = KeyChange::parse(br#"{"tier":"","publish":"never"}"#)
            .unwrap()
            .apply(pro);
        assert_eq!(back.tier, None, "an empty tier: the deployment's bindings");
        assert_eq!(
            back.publish.opt_in(Some(2)),
            None,
            "never, whatever the URL"
        );
        assert_eq!(Publish::Client.opt_in(Some(2)), Some(2));
        assert_eq!(Publish::Client.opt_in(None), None);
        for bad in [
            &br#"{"tier":"Pro"}"#[..],
            br#"{"tier":"a-b"}"#,
            br#"{"publish":{"after_blocks":0}}"#,
            br#"{"publish":"always"}"#,
        ] {
            assert!(
                KeyChange::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A record written before these fields reads as the defaults.
        let old: KeyRecord = serde_json::from_str(r#"{"id":"k_1","label":"x"}"#).unwrap();
        assert_eq!((old.tier, old.publish), (None, Publish::Client));
    }
}
