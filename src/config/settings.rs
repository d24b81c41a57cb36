//! Every setting of the relay as one definition ([`Setting`]): its variable's name, whether it
//! is a secret, whether it is the deployment's or a chain's ([`Scope`]), its default as the
//! README's settings table gives it, what it means, and how its value is read. [`SETTINGS`]
//! lists them all; [`crate::config::Config::from_lookup`] reads each through [`Setting::read`],
//! and a test holds the README's table and `wrangler.toml` to this list.

use super::ConfigError;
use crate::access::cors::CorsOrigins;
use crate::access::keys::Keyless;
use crate::access::methods::Patterns;
use crate::cache::finality::Finality;
use crate::cache::proof::Proof;
use crate::hardfork::Hardfork;
use crate::ordering::sender::{PoolKind, ReplacementPolicy, DEFAULT_GAP_WAIT_MS};
use crate::websocket::SocketLimits;

/// Whose a setting is, and so where it is read ([`Vars`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole deployment's: one value for every request and every chain (the edge's limits,
    /// CORS, the admin token, the WebSocket limits), read as `NAME` only.
    Deployment,
    /// A chain's, the top-level value its default: its rules and its senders' settings, read for
    /// chain `id` as `CHAIN_<id>_NAME`, else `NAME`.
    Chain,
    /// A chain's own, never another's: its upstreams, its private route, and what its upstreams
    /// and its chain are (the pool kind, the hard fork), read for chain `id` as `CHAIN_<id>_NAME`
    /// only (`NAME` is the default chain's; unset, the setting's default). A served chain's
    /// `CHAIN_ID` is its id.
    ChainOwn,
}

/// Where the settings of one chain are read: the default chain's (`CHAIN_ID`, served at `/`)
/// from the top-level variables, another served chain's (`CHAINS`) as its [`Scope`] says.
pub struct Vars<'a> {
    get: &'a dyn Fn(&str) -> Option<String>,
    chain: Option<u64>,
}

impl<'a> Vars<'a> {
    /// The default chain's: every setting from its top-level variable.
    pub fn top(get: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Vars { get, chain: None }
    }

    /// Served chain `id`'s (not the default chain).
    pub fn chain(get: &'a dyn Fn(&str) -> Option<String>, id: u64) -> Self {
        Vars {
            get,
            chain: Some(id),
        }
    }

    /// The chain these are, `None` for the default chain.
    pub fn chain_id(&self) -> Option<u64> {
        self.chain
    }

    /// The variable that sets `about` for this chain first: `CHAIN_<id>_NAME` for a served
    /// chain's setting, else `NAME`.
    pub fn variable(&self, about: &About) -> String {
        match (self.chain, about.scope) {
            (Some(id), Scope::Chain | Scope::ChainOwn) => format!("CHAIN_{id}_{}", about.name),
            _ => about.name.to_string(),
        }
    }

    /// The value of `about` for this chain, `None` when unset (an empty value counts as unset).
    pub fn value(&self, about: &About) -> Option<String> {
        let set = |name: &str| (self.get)(name).filter(|v| !v.trim().is_empty());
        match (self.chain, about.scope) {
            (Some(id), Scope::ChainOwn) if about.name == CHAIN_ID.about.name => {
                Some(id.to_string())
            }
            (Some(_), Scope::ChainOwn) => set(&self.variable(about)),
            (Some(_), Scope::Chain) => set(&self.variable(about)).or_else(|| set(about.name)),
            _ => set(about.name),
        }
    }
}

/// What a setting is, apart from how its value is read: one row of the README's settings table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The variable's name (wrangler.toml `[vars]`, or a secret).
    pub name: &'static str,
    /// Whether it is set with `wrangler secret put` (it may carry a key), never in `[vars]`.
    pub secret: bool,
    /// Whose it is.
    pub scope: Scope,
    /// The default, as the README's table gives it (its second column, Markdown).
    pub default: &'static str,
    /// What it means, in a line.
    pub docs: &'static str,
}

/// One setting of type `T`: [`About`] it, its value when unset (`None`: required), and how a
/// value is read (an error is the problem, said after the variable's name: `must be ...`).
pub struct Setting<T> {
    /// What it is.
    pub about: About,
    /// Its value when unset or empty; `None`: it must be set.
    default: Option<fn() -> T>,
    /// Reads a value that is set (not empty).
    parse: fn(&str) -> Result<T, String>,
}

impl<T> Setting<T> {
    /// Reads the setting of one chain ([`Vars`]).
    ///
    /// # Errors
    /// [`ConfigError`] naming the setting (and the chain) when its value does not parse, or when
    /// it must be set and is not.
    pub fn read(&self, vars: &Vars) -> Result<T, ConfigError> {
        let name = self.about.name;
        let error = |problem| ConfigError {
            name,
            chain: vars.chain_id(),
            problem,
        };
        match vars.value(&self.about) {
            Some(value) => (self.parse)(&value).map_err(error),
            None => self.default.map(|default| default()).ok_or_else(|| {
                error(format!(
                    "is not set (wrangler secret put {})",
                    vars.variable(&self.about)
                ))
            }),
        }
    }
}

/// A whole number (`must be a whole number, got "x"`).
fn whole<N: std::str::FromStr>(v: &str) -> Result<N, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("must be a whole number, got {v:?}"))
}

/// A whole number of 1 or more, for a setting whose being unset means `unset` (`must be 1 or
/// more (unset: {unset})` for 0).
fn one_or_more(v: &str, unset: &str) -> Result<Option<u64>, String> {
    match whole::<u64>(v)? {
        0 => Err(format!("must be 1 or more (unset: {unset})")),
        n => Ok(Some(n)),
    }
}

/// A whole number of seconds, as ms.
fn seconds_as_ms(v: &str) -> Result<u64, String> {
    whole::<u64>(v).map(|s| s.saturating_mul(1_000))
}

/// `true`/`1` or `false`/`0`.
fn truth(v: &str) -> Result<bool, String> {
    match v.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("must be true or false, got {v:?}")),
    }
}

/// The value of the name `v` among `options`; any other value is an error naming them all
/// (`must be a, b or c, got "x"`).
fn pick<T: Copy>(v: &str, options: &[(&str, T)]) -> Result<T, String> {
    let v = v.trim();
    if let Some((_, value)) = options.iter().find(|(option, _)| *option == v) {
        return Ok(*value);
    }
    let names: Vec<&str> = options.iter().map(|(option, _)| *option).collect();
    let (last, rest) = names.split_last().expect("at least one option");
    Err(format!("must be {} or {last}, got {v:?}", rest.join(", ")))
}

/// A decimal or 0x-hex 64-bit number.
pub(super) fn parse_chain_id(v: &str) -> Option<u64> {
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// An [`About`]: `secret` first for a secret, then the name, the [`Scope`], the default and the docs.
macro_rules! about {
    ($name:literal, $scope:ident, $default:literal, $docs:literal) => {
        About {
            name: $name,
            secret: false,
            scope: Scope::$scope,
            default: $default,
            docs: $docs,
        }
    };
    (secret $name:literal, $scope:ident, $default:literal, $docs:literal) => {
        About {
            name: $name,
            secret: true,
            scope: Scope::$scope,
            default: $default,
            docs: $docs,
        }
    };
}

/// `UPSTREAM_RPC_URL`: the nodes every request goes to, the first preferred (checked with the
/// other URL settings in [`crate::config::Config::from_lookup`]).
pub const UPSTREAM_RPC_URL: Setting<String> = Setting {
    about: about!(secret "UPSTREAM_RPC_URL", ChainOwn, "none, required",
        "HTTP(S) JSON-RPC endpoint every request goes to, or a comma-separated list"),
    default: None,
    parse: |v| Ok(v.to_string()),
};

/// `UPSTREAM_SEND_URL`: a private transaction route, or a list of them (as written; checked in
/// [`crate::config::Config::from_lookup`]).
pub const UPSTREAM_SEND_URL: Setting<Option<String>> = Setting {
    about: about!(secret "UPSTREAM_SEND_URL", ChainOwn, "unset",
        "a private transaction route, or a comma-separated list: every transaction goes there"),
    default: Some(|| None),
    parse: |v| Ok(Some(v.to_string())),
};

/// `SEND_STATUS_URL`: each private route's status URL, one per route (as written).
pub const SEND_STATUS_URL: Setting<Option<String>> = Setting {
    about: about!(
        "SEND_STATUS_URL",
        ChainOwn,
        "unset",
        "with UPSTREAM_SEND_URL: each route's status URL, `{hash}` where the hash goes"
    ),
    default: Some(|| None),
    parse: |v| Ok(Some(v.to_string())),
};

/// `SEND_PUBLIC_AFTER_BLOCKS`: the most blocks a client may ask a private transaction wait
/// before it is also sent to the public mempool (at least 1; unset: never).
pub const SEND_PUBLIC_AFTER_BLOCKS: Setting<Option<u64>> = Setting {
    about: about!("SEND_PUBLIC_AFTER_BLOCKS", ChainOwn, "unset",
        "with UPSTREAM_SEND_URL: the most blocks a client may ask before its transaction goes public"),
    default: Some(|| None),
    parse: |v| one_or_more(v, "never"),
};

/// `UPSTREAM_WS_URL`: the upstream WebSockets (as written; unset: derived from
/// `UPSTREAM_RPC_URL`).
pub const UPSTREAM_WS_URL: Setting<Option<String>> = Setting {
    about: about!(secret "UPSTREAM_WS_URL", ChainOwn, "`UPSTREAM_RPC_URL` with `ws://`/`wss://`",
        "the upstream WebSocket(s) eth_subscribe is served from"),
    default: Some(|| None),
    parse: |v| Ok(Some(v.to_string())),
};

/// `SEND_BROADCAST`: `none` (hedged: `false`) or `all` (`true`).
pub const SEND_BROADCAST: Setting<bool> = Setting {
    about: about!(
        "SEND_BROADCAST",
        Chain,
        "`none`",
        "with several upstreams: `none` sends to the best, `all` to every healthy one"
    ),
    default: Some(|| false),
    parse: |v| pick(v, &[("none", false), ("all", true)]),
};

/// `CHAIN_ID`: the only chain id accepted; unset: learned from the upstream.
pub const CHAIN_ID: Setting<Option<u64>> = Setting {
    about: about!(
        "CHAIN_ID",
        ChainOwn,
        "learned",
        "the only chain id accepted; unset: asked once from the upstream"
    ),
    default: Some(|| None),
    parse: |v| {
        parse_chain_id(v)
            .map(Some)
            .ok_or_else(|| format!("must be a decimal or 0x-hex 64-bit number, got {v:?}"))
    },
};

/// The settings a chain of `CHAINS` inherited from the top-level variable until issue 53 made
/// them its own (each one's doc says why). A deployment that sets one at the top level and
/// serves a chain without its own `CHAIN_<id>_NAME` is told once ([`crate::config::chains::Chains::notices`]).
pub const NO_LONGER_INHERITED: [&About; 3] = [
    &ALLOW_UNPROTECTED_TXS.about,
    &REPLACEMENT_POLICY.about,
    &METHOD_ALLOWLIST.about,
];

/// `ALLOW_UNPROTECTED_TXS`: accept legacy transactions without an EIP-155 chain id. A chain's
/// own ([`Scope::ChainOwn`]): a pre-EIP-155 transaction is valid on every chain, so allowing one
/// on the default chain must not make a victim's transaction replayable to every chain served.
pub const ALLOW_UNPROTECTED_TXS: Setting<bool> = Setting {
    about: about!(
        "ALLOW_UNPROTECTED_TXS",
        ChainOwn,
        "`false`",
        "accept legacy transactions without an EIP-155 chain id"
    ),
    default: Some(|| false),
    parse: truth,
};

/// `ENABLE_NONCE_ORDERING`: route transactions through their sender's Durable Object.
pub const ENABLE_NONCE_ORDERING: Setting<bool> = Setting {
    about: about!(
        "ENABLE_NONCE_ORDERING",
        Chain,
        "`true`",
        "route transactions through the sender's Durable Object"
    ),
    default: Some(|| true),
    parse: truth,
};

/// `LOCK_MAX_HOLD_MS`: a transaction's whole budget once it holds its sender's lock, ms (above 0).
pub const LOCK_MAX_HOLD_MS: Setting<u64> = Setting {
    about: about!(
        "LOCK_MAX_HOLD_MS",
        Chain,
        "`30000`",
        "a transaction's whole budget once it holds its sender's lock (ms)"
    ),
    default: Some(|| 30_000),
    parse: |v| match whole::<u64>(v)? {
        0 => Err("must be above 0".into()),
        ms => Ok(ms),
    },
};

/// `NONCE_GAP_WAIT_MS`: how long a transaction above the sender's next nonce waits, ms.
pub const NONCE_GAP_WAIT_MS: Setting<u64> = Setting {
    about: about!(
        "NONCE_GAP_WAIT_MS",
        Chain,
        "`3000`",
        "how long (ms) a transaction above the sender's next nonce waits for the missing ones"
    ),
    default: Some(|| DEFAULT_GAP_WAIT_MS),
    parse: whole,
};

/// `UPSTREAM_POOL`: `auto` (`None`), `mempool` or `strict` ([`PoolKind`]).
pub const UPSTREAM_POOL: Setting<Option<PoolKind>> = Setting {
    about: about!(
        "UPSTREAM_POOL",
        ChainOwn,
        "`auto`",
        "whether the upstream keeps a transaction above a nonce gap: `mempool`, `strict` or `auto`"
    ),
    default: Some(|| None),
    parse: |v| {
        pick(
            v,
            &[
                ("auto", None),
                ("mempool", Some(PoolKind::Mempool)),
                ("strict", Some(PoolKind::Strict)),
            ],
        )
    },
};

/// `HARDFORK`: the fork whose stateless rules a transaction must meet (`none`: `None`).
pub const HARDFORK: Setting<Option<Hardfork>> = Setting {
    about: about!("HARDFORK", ChainOwn, "`osaka`",
        "the fork whose stateless rules a transaction must meet; `none` leaves them to the upstream"),
    default: Some(|| Some(Hardfork::Osaka)),
    parse: |v| {
        let v = v.trim();
        if v.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        Hardfork::parse(v).map(Some).ok_or_else(|| {
            format!("must be none or a fork name (frontier ... cancun, prague, osaka), got {v:?}")
        })
    },
};

/// `UPSTREAM_TIMEOUT_MS`: how long one upstream request may take, ms.
pub const UPSTREAM_TIMEOUT_MS: Setting<u64> = Setting {
    about: about!(
        "UPSTREAM_TIMEOUT_MS",
        Chain,
        "`60000`",
        "how long one upstream request may take (ms)"
    ),
    default: Some(|| 60_000),
    parse: whole,
};

/// `MAX_HEAD_LAG`: how many blocks an upstream may be behind the best before it gets no reads
/// of the tip.
pub const MAX_HEAD_LAG: Setting<u64> = Setting {
    about: about!(
        "MAX_HEAD_LAG",
        Chain,
        "`2`",
        "how many blocks an upstream may be behind the best before it gets no reads of the tip"
    ),
    default: Some(|| 2),
    parse: whole,
};

/// `UPSTREAM_RETRIES`: `deadline` (`None`) or at most this many more sends after an answer that
/// says nothing.
pub const UPSTREAM_RETRIES: Setting<Option<u32>> = Setting {
    about: about!(
        "UPSTREAM_RETRIES",
        Chain,
        "`deadline`",
        "a transaction is sent again until its deadline, or at most this many more times"
    ),
    default: Some(|| None),
    parse: |v| match v.trim() {
        "deadline" => Ok(None),
        n => n
            .parse()
            .map(Some)
            .map_err(|_| format!("must be deadline or a whole number, got {v:?}")),
    },
};

/// `IDEMPOTENCY_TTL_S`: how long an accepted transaction's hash is answered again, read as ms.
pub const IDEMPOTENCY_TTL_S: Setting<u64> = Setting {
    about: about!(
        "IDEMPOTENCY_TTL_S",
        Chain,
        "`300`",
        "how long (s) an accepted transaction's hash is answered again without the upstream"
    ),
    default: Some(|| 300_000),
    parse: seconds_as_ms,
};

/// `TRACK_INTERVAL_S`: how often a sender's pending transactions are checked, read as ms (0: off).
pub const TRACK_INTERVAL_S: Setting<u64> = Setting {
    about: about!(
        "TRACK_INTERVAL_S",
        Chain,
        "`12`",
        "how often (s) a sender's object asks what became of its accepted transactions"
    ),
    default: Some(|| 12_000),
    parse: seconds_as_ms,
};

/// `TRACK_TTL_S`: how long an accepted transaction is followed, read as ms.
pub const TRACK_TTL_S: Setting<u64> = Setting {
    about: about!(
        "TRACK_TTL_S",
        Chain,
        "`600`",
        "how long (s) an accepted transaction is followed before it is given up"
    ),
    default: Some(|| 600_000),
    parse: seconds_as_ms,
};

/// `SYNC_TIMEOUT_MS`: a send-and-wait call's wait when it gives none, ms (EIP-7966).
pub const SYNC_TIMEOUT_MS: Setting<u64> = Setting {
    about: about!(
        "SYNC_TIMEOUT_MS",
        Chain,
        "`2000`",
        "how long (ms) eth_sendRawTransactionSync waits when the call gives no timeout"
    ),
    default: Some(|| 2_000),
    parse: whole,
};

/// `SYNC_TIMEOUT_MAX_MS`: the longest a send-and-wait call may ask to wait, ms.
pub const SYNC_TIMEOUT_MAX_MS: Setting<u64> = Setting {
    about: about!(
        "SYNC_TIMEOUT_MAX_MS",
        Chain,
        "`30000`",
        "the longest (ms) a send-and-wait call may ask to wait"
    ),
    default: Some(|| 30_000),
    parse: whole,
};

/// `REPLACEMENT_POLICY`: `forward` or `reject` (unset: by the pool kind). A chain's own
/// ([`Scope::ChainOwn`]): its default follows the chain's own pool, so a `forward` chosen for
/// the default chain's mempool must not reach a strict chain (Hedera's: each refused
/// replacement a charged `WRONG_NONCE`).
pub const REPLACEMENT_POLICY: Setting<Option<ReplacementPolicy>> = Setting {
    about: about!(
        "REPLACEMENT_POLICY",
        ChainOwn,
        "`forward`; `reject` when the upstream pool is strict",
        "a different transaction with the nonce of an accepted one: `forward` or `reject`"
    ),
    default: Some(|| None),
    parse: |v| {
        pick(
            v,
            &[
                ("forward", Some(ReplacementPolicy::Forward)),
                ("reject", Some(ReplacementPolicy::Reject)),
            ],
        )
    },
};

/// `MAX_QUEUE_PER_SENDER`: the most transactions that may wait per sender.
pub const MAX_QUEUE_PER_SENDER: Setting<usize> = Setting {
    about: about!(
        "MAX_QUEUE_PER_SENDER",
        Chain,
        "`64`",
        "most transactions waiting per sender"
    ),
    default: Some(|| 64),
    parse: whole,
};

/// `MAX_SENDER_BYTES`: the most bytes of transactions one sender's object holds, bytes.
pub const MAX_SENDER_BYTES: Setting<u64> = Setting {
    about: about!(
        "MAX_SENDER_BYTES",
        Chain,
        "`8388608`",
        "most bytes of transactions one sender's object holds in memory"
    ),
    default: Some(|| super::DEFAULT_MAX_SENDER_BYTES),
    parse: whole,
};

/// `SEND_WINDOW`: how many consecutive nonces of a sender may be with a mempool upstream at
/// once (1 to [`super::MAX_SEND_WINDOW`]).
pub const SEND_WINDOW: Setting<usize> = Setting {
    about: about!(
        "SEND_WINDOW",
        Chain,
        "`16`",
        "how many consecutive nonces of one sender may be with a mempool upstream at once"
    ),
    default: Some(|| 16),
    parse: |v| match whole::<usize>(v)? {
        n @ 1..=super::MAX_SEND_WINDOW => Ok(n),
        n => Err(format!("must be 1 to {}, got {n}", super::MAX_SEND_WINDOW)),
    },
};

/// `METHOD_ALLOWLIST`: methods let through although refused by default. A chain's own
/// ([`Scope::ChainOwn`]): `debug_*` let through to the operator's own node must not reach
/// every chain's (a provider's, billed per call). `METHOD_DENYLIST` is inherited: refusing more
/// is the safe direction.
pub const METHOD_ALLOWLIST: Setting<Patterns> = Setting {
    about: about!(
        "METHOD_ALLOWLIST",
        ChainOwn,
        "empty",
        "methods let through although refused by default"
    ),
    default: Some(|| Patterns::parse(None)),
    parse: |v| Ok(Patterns::parse(Some(v))),
};

/// `METHOD_DENYLIST`: more methods to refuse.
pub const METHOD_DENYLIST: Setting<Patterns> = Setting {
    about: about!("METHOD_DENYLIST", Chain, "empty", "more methods to refuse"),
    default: Some(|| Patterns::parse(None)),
    parse: |v| Ok(Patterns::parse(Some(v))),
};

/// `ADMIN_TOKEN`: the bearer token of `GET /senders/{address}`.
pub const ADMIN_TOKEN: Setting<Option<String>> = Setting {
    about: about!(secret "ADMIN_TOKEN", Deployment, "unset",
        "bearer token of GET /senders/{address}; unset, that route does not exist"),
    default: Some(|| None),
    parse: |v| Ok(Some(v.to_string())),
};

/// `RELAY_SECRET`: the deployment's secret, under which the read cache's keys in the data
/// centre's Cache API are an HMAC ([`super::RelaySecret`]).
pub const RELAY_SECRET: Setting<Option<super::RelaySecret>> = Setting {
    about: about!(secret "RELAY_SECRET", Deployment, "unset",
        "the deployment's secret (32 random bytes, e.g. `openssl rand -hex 32`): the read cache's keys in the data centre's Cache API are an HMAC under it, so no other Worker on the zone can write what the relay serves; unset, the Cache API is not used (the isolate's memory only)"),
    default: Some(|| None),
    parse: |v| Ok(Some(super::RelaySecret::new(v.trim()))),
};

/// `RELAY_SECRET_PREVIOUS`: the secret `RELAY_SECRET` replaced, kept while the API keys made
/// under it are in use ([`crate::access::keys`]).
pub const RELAY_SECRET_PREVIOUS: Setting<Option<super::RelaySecret>> = Setting {
    about: about!(secret "RELAY_SECRET_PREVIOUS", Deployment, "unset",
        "when `RELAY_SECRET` is rotated, the one it replaced: API keys made under it still work (each is looked up under the new secret, then this one); unset once they are revoked or re-issued ([docs/keys.md](docs/keys.md))"),
    default: Some(|| None),
    parse: |v| Ok(Some(super::RelaySecret::new(v.trim()))),
};

/// `KEYLESS`: who may use the endpoint without an API key, where keys are on
/// ([`crate::access::keys`]).
pub const KEYLESS: Setting<Keyless> = Setting {
    about: about!("KEYLESS", Deployment, "`open`",
        "with API keys on (a `KEYS` KV binding and `RELAY_SECRET`, see [docs/keys.md](docs/keys.md)), who may call without a key: `open` (anyone, as without keys), `reads` (sends need a key), `closed` (everything needs a key); refused: HTTP 401, -32016"),
    default: Some(|| Keyless::Open),
    parse: |v| pick(v, &[("open", Keyless::Open), ("reads", Keyless::Reads), ("closed", Keyless::Closed)]),
};

/// `CORS_ORIGINS`: the origins whose pages may read the answers.
pub const CORS_ORIGINS: Setting<CorsOrigins> = Setting {
    about: about!(
        "CORS_ORIGINS",
        Deployment,
        "`*`",
        "origins whose pages may read the answers"
    ),
    default: Some(|| CorsOrigins::parse(None)),
    parse: |v| Ok(CorsOrigins::parse(Some(v))),
};

/// `RATE_LIMIT_PERIOD_S`: the rate limit bindings' period, s (a refusal's `Retry-After`).
pub const RATE_LIMIT_PERIOD_S: Setting<u64> = Setting {
    about: about!(
        "RATE_LIMIT_PERIOD_S",
        Deployment,
        "`60`",
        "the Retry-After (s) of a rate-limited answer"
    ),
    default: Some(|| 60),
    parse: whole,
};

/// `MAX_BATCH`: the most requests in one batch.
pub const MAX_BATCH: Setting<usize> = Setting {
    about: about!(
        "MAX_BATCH",
        Deployment,
        "`100`",
        "most requests in one JSON-RPC batch"
    ),
    default: Some(|| 100),
    parse: whole,
};

/// `MAX_REQUEST_BYTES`: the largest request body, bytes.
pub const MAX_REQUEST_BYTES: Setting<usize> = Setting {
    about: about!(
        "MAX_REQUEST_BYTES",
        Deployment,
        "`4194304`",
        "largest request body (bytes)"
    ),
    default: Some(|| 4 << 20),
    parse: whole,
};

/// `MAX_UPSTREAM_RESPONSE_BYTES`: the largest upstream answer relayed, bytes.
pub const MAX_UPSTREAM_RESPONSE_BYTES: Setting<usize> = Setting {
    about: about!(
        "MAX_UPSTREAM_RESPONSE_BYTES",
        Deployment,
        "`16777216`",
        "largest upstream answer relayed (bytes)"
    ),
    default: Some(|| 16 << 20),
    parse: whole,
};

/// `WS_MAX_SUBSCRIPTIONS`: the most subscriptions of one WebSocket connection.
pub const WS_MAX_SUBSCRIPTIONS: Setting<usize> = Setting {
    about: about!(
        "WS_MAX_SUBSCRIPTIONS",
        Deployment,
        "`100`",
        "most subscriptions one WebSocket connection holds"
    ),
    default: Some(|| SocketLimits::default().max_subscriptions),
    parse: whole,
};

/// `WS_MAX_MESSAGE_BYTES`: the largest WebSocket message a client may send, bytes.
pub const WS_MAX_MESSAGE_BYTES: Setting<usize> = Setting {
    about: about!(
        "WS_MAX_MESSAGE_BYTES",
        Deployment,
        "`1000000`",
        "largest WebSocket message a client may send (bytes)"
    ),
    default: Some(|| SocketLimits::default().max_message_bytes),
    parse: whole,
};

/// `WS_IDLE_TIMEOUT_S`: how long a silent WebSocket connection stays, read as ms.
pub const WS_IDLE_TIMEOUT_S: Setting<u64> = Setting {
    about: about!(
        "WS_IDLE_TIMEOUT_S",
        Deployment,
        "`600`",
        "how long (s) a WebSocket connection with no message either way stays open"
    ),
    default: Some(|| SocketLimits::default().idle_timeout_ms),
    parse: seconds_as_ms,
};

/// `WS_UPSTREAM_RECONNECT_MS`: how long a dropped upstream WebSocket is tried again, ms.
pub const WS_UPSTREAM_RECONNECT_MS: Setting<u64> = Setting {
    about: about!(
        "WS_UPSTREAM_RECONNECT_MS",
        Deployment,
        "`30000`",
        "how long (ms) the relay tries to get a dropped upstream WebSocket back"
    ),
    default: Some(|| SocketLimits::default().upstream_reconnect_ms),
    parse: whole,
};

/// `WS_MAX_CONNECTION_BYTES`: what one WebSocket connection may keep in memory, bytes.
pub const WS_MAX_CONNECTION_BYTES: Setting<usize> = Setting {
    about: about!(
        "WS_MAX_CONNECTION_BYTES",
        Deployment,
        "`4194304`",
        "what one WebSocket connection may keep in the isolate's memory (bytes)"
    ),
    default: Some(|| SocketLimits::default().max_connection_bytes),
    parse: whole,
};

/// `WS_MAX_ISOLATE_BYTES`: what all WebSocket connections of an isolate may keep, bytes.
pub const WS_MAX_ISOLATE_BYTES: Setting<usize> = Setting {
    about: about!(
        "WS_MAX_ISOLATE_BYTES",
        Deployment,
        "`33554432`",
        "what all the WebSocket connections of one isolate may keep together (bytes)"
    ),
    default: Some(|| SocketLimits::default().max_isolate_bytes),
    parse: whole,
};

/// `CACHE`: whether clients' reads are answered from the read cache ([`crate::cache`]).
pub const CACHE: Setting<bool> = Setting {
    about: about!(
        "CACHE",
        Chain,
        "`on`",
        "`on`: reads answered from the isolate's cache while the chain says they hold; `off`"
    ),
    default: Some(|| true),
    parse: |v| pick(v, &[("on", true), ("off", false)]),
};

/// `CACHE_MAX_BYTES`: what the read cache of one isolate may keep, bytes.
pub const CACHE_MAX_BYTES: Setting<usize> = Setting {
    about: about!(
        "CACHE_MAX_BYTES",
        Deployment,
        "`16777216`",
        "what the read cache of one isolate may keep, every chain's answers together (bytes)"
    ),
    default: Some(|| 16 << 20),
    parse: whole,
};

/// `CACHE_HEAD_MS`: how long the head the cache learned is believed, ms.
pub const CACHE_HEAD_MS: Setting<u64> = Setting {
    about: about!(
        "CACHE_HEAD_MS",
        Chain,
        "`1000`",
        "how long (ms) the cache believes the head it asked: an answer at the head is served at most this long after"
    ),
    default: Some(|| 1_000),
    parse: whole,
};

/// `CACHE_HEAD_WATCH`: whether each isolate follows the chain's head over an upstream WebSocket
/// (`newHeads`) besides asking it ([`crate::cache::head_watch`]).
pub const CACHE_HEAD_WATCH: Setting<bool> = Setting {
    about: about!(
        "CACHE_HEAD_WATCH",
        Chain,
        "`on`",
        "`on`: while reads come, each isolate follows the head on one upstream WebSocket (`newHeads`), so a reorg reaches the cache when the node announces it; `off`: the head is asked (and moved by clients' `newHeads`)"
    ),
    default: Some(|| true),
    parse: |v| pick(v, &[("on", true), ("off", false)]),
};

/// `CACHE_FINALITY_DEPTH`: blocks below the head taken as finalized where the chain has no
/// `finalized` tag.
pub const CACHE_FINALITY_DEPTH: Setting<u64> = Setting {
    about: about!(
        "CACHE_FINALITY_DEPTH",
        Chain,
        "`64`",
        "blocks below the head the cache takes as finalized when the upstream answers no `finalized` block"
    ),
    default: Some(|| 64),
    parse: whole,
};

/// `CACHE_FINALITY`: how the cache knows a chain's finalized block ([`Finality`]).
pub const CACHE_FINALITY: Setting<Finality> = Setting {
    about: about!(
        "CACHE_FINALITY",
        ChainOwn,
        "`auto`",
        "how the cache knows the finalized block: `tag` asks `finalized` (an upstream without it: the head less `CACHE_FINALITY_DEPTH`), `depth` takes the head less `CACHE_FINALITY_DEPTH`, `auto` is `depth` on Hedera's chain ids 295-298 (its relay answers `finalized` with its mirror's latest) and `tag` elsewhere"
    ),
    default: Some(|| Finality::Auto),
    parse: |v| {
        pick(
            v,
            &[
                ("auto", Finality::Auto),
                ("tag", Finality::Tag),
                ("depth", Finality::Depth),
            ],
        )
    },
};

/// `CACHE_BLOOM_PROOF`: what may prove an empty `eth_getLogs` answer about a block
/// ([`crate::cache::proof::Proof`]).
pub const CACHE_BLOOM_PROOF: Setting<Proof> = Setting {
    about: about!(
        "CACHE_BLOOM_PROOF",
        ChainOwn,
        "`auto`",
        "`on`: an empty or short `eth_getLogs` answer above the finalized block is kept when each block it lists no log of has a bloom that rules the filter out, or roots that say it has no transaction; `off`: the roots only; `auto`: `on`, but nothing proves on Hedera's chain ids 295-298 (its mirror gives synthetic HTS logs no bloom bits); an answer that contradicts a header turns the proof off for the chain (`cache_bloom_off`)"
    ),
    default: Some(|| Proof::Auto),
    parse: |v| {
        pick(
            v,
            &[("auto", Proof::Auto), ("on", Proof::On), ("off", Proof::Off)],
        )
    },
};

/// `GETLOGS_SPLIT`: whether an `eth_getLogs` range too wide for the upstream is asked as pieces
/// ([`crate::upstream::logs`]).
pub const GETLOGS_SPLIT: Setting<bool> = Setting {
    about: about!("GETLOGS_SPLIT", Chain, "`on`",
        "`on`: an `eth_getLogs` range the upstream refuses as too wide (or wider than a cap known) is asked as aligned pieces and answered whole ([docs/getlogs.md](docs/getlogs.md)); `off`: the provider's refusal is the client's"),
    default: Some(|| true),
    parse: |v| pick(v, &[("on", true), ("off", false)]),
};

/// `GETLOGS_MAX_PIECES`: the most pieces one `eth_getLogs` is asked in.
pub const GETLOGS_MAX_PIECES: Setting<usize> = Setting {
    about: about!("GETLOGS_MAX_PIECES", Chain, "`40`",
        "the most pieces one split `eth_getLogs` may be asked in (each a subrequest); a range that needs more is refused before any ask, -32602"),
    default: Some(|| 40),
    parse: |v| match whole::<usize>(v)? {
        0 => Err("must be 1 or more".into()),
        n => Ok(n),
    },
};

/// `GETLOGS_MAX_RANGE`: the most blocks one split `eth_getLogs` may span.
pub const GETLOGS_MAX_RANGE: Setting<Option<u64>> = Setting {
    about: about!("GETLOGS_MAX_RANGE", Chain, "unset",
        "the most blocks an `eth_getLogs` the relay must split may span (-32602 over it); unset: what `GETLOGS_MAX_PIECES` covers. A range the upstream takes whole is never refused by it"),
    default: Some(|| None),
    parse: |v| one_or_more(v, "no cap of the relay's"),
};

/// `GETLOGS_UPSTREAM_RANGE`: the block range cap per `eth_getLogs` the operator knows of the
/// upstreams ([`crate::upstream::logs::limits::UpstreamRanges`]).
pub const GETLOGS_UPSTREAM_RANGE: Setting<crate::upstream::logs::limits::UpstreamRanges> = Setting {
    about: about!("GETLOGS_UPSTREAM_RANGE", ChainOwn, "unset",
        "the most blocks the upstreams take in one `eth_getLogs`, when known: one for all, or one per `UPSTREAM_RPC_URL` in its order (`1000,,10000`; empty: learned); a wider range goes as pieces at once, with no refusal first; unset: each upstream's learned from its refusals"),
    default: Some(crate::upstream::logs::limits::UpstreamRanges::default),
    parse: crate::upstream::logs::limits::UpstreamRanges::parse,
};

/// `CHAINS`: the chains served at `/evm/{id}` besides the default one (`CHAIN_ID`, at `/`),
/// with their aliases ([`super::chain_entry::ChainEntry`]).
pub const CHAINS: Setting<Vec<super::chain_entry::ChainEntry>> = Setting {
    about: about!(
        "CHAINS",
        Deployment,
        "unset",
        "more chains served at /evm/{chainId}, comma-separated, each `id` or `id:alias`"
    ),
    default: Some(Vec::new),
    parse: super::chain_entry::parse_entries,
};

/// Every setting, in the README's order.
pub const SETTINGS: &[About] = &[
    CHAINS.about,
    UPSTREAM_RPC_URL.about,
    SEND_BROADCAST.about,
    CHAIN_ID.about,
    ALLOW_UNPROTECTED_TXS.about,
    ENABLE_NONCE_ORDERING.about,
    LOCK_MAX_HOLD_MS.about,
    NONCE_GAP_WAIT_MS.about,
    UPSTREAM_POOL.about,
    HARDFORK.about,
    UPSTREAM_TIMEOUT_MS.about,
    MAX_HEAD_LAG.about,
    UPSTREAM_RETRIES.about,
    IDEMPOTENCY_TTL_S.about,
    TRACK_INTERVAL_S.about,
    TRACK_TTL_S.about,
    SYNC_TIMEOUT_MS.about,
    SYNC_TIMEOUT_MAX_MS.about,
    REPLACEMENT_POLICY.about,
    MAX_QUEUE_PER_SENDER.about,
    MAX_SENDER_BYTES.about,
    SEND_WINDOW.about,
    ADMIN_TOKEN.about,
    RELAY_SECRET.about,
    RELAY_SECRET_PREVIOUS.about,
    KEYLESS.about,
    CORS_ORIGINS.about,
    METHOD_ALLOWLIST.about,
    METHOD_DENYLIST.about,
    RATE_LIMIT_PERIOD_S.about,
    MAX_BATCH.about,
    MAX_REQUEST_BYTES.about,
    MAX_UPSTREAM_RESPONSE_BYTES.about,
    SEND_STATUS_URL.about,
    SEND_PUBLIC_AFTER_BLOCKS.about,
    UPSTREAM_SEND_URL.about,
    UPSTREAM_WS_URL.about,
    WS_MAX_SUBSCRIPTIONS.about,
    WS_MAX_MESSAGE_BYTES.about,
    WS_IDLE_TIMEOUT_S.about,
    WS_UPSTREAM_RECONNECT_MS.about,
    WS_MAX_CONNECTION_BYTES.about,
    WS_MAX_ISOLATE_BYTES.about,
    CACHE.about,
    CACHE_MAX_BYTES.about,
    CACHE_HEAD_MS.about,
    CACHE_HEAD_WATCH.about,
    CACHE_FINALITY.about,
    CACHE_FINALITY_DEPTH.about,
    CACHE_BLOOM_PROOF.about,
    GETLOGS_SPLIT.about,
    GETLOGS_MAX_PIECES.about,
    GETLOGS_MAX_RANGE.about,
    GETLOGS_UPSTREAM_RANGE.about,
];
