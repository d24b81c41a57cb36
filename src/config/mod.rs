//! The relay's settings, read from the Worker's environment (wrangler.toml `[vars]` and secrets):
//! each one defined once in [`settings`] (name, default, meaning, how it is read), which the
//! README's settings table lists exactly.

/// The default `MAX_SENDER_BYTES`: 8 MiB, about ten six-blob transactions with their sidecars,
/// or thousands of ordinary ones (a Worker isolate has 128 MB, shared by the objects it runs).
pub const DEFAULT_MAX_SENDER_BYTES: u64 = 8 * 1024 * 1024;

use crate::access::cors::CorsOrigins;
use crate::access::methods::MethodPolicy;
use crate::hardfork::Hardfork;
use crate::ordering::sender::{PoolKind, ReplacementPolicy, Settings};
use crate::upstream::retry::RetryPolicy;
use crate::upstream::route::UpstreamSet;
use crate::websocket::SocketLimits;
use std::fmt;

/// Parsed settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `UPSTREAM_RPC_URL` (secret, required): the node every request goes to, or a
    /// comma-separated list of nodes, the first preferred ([`crate::upstream::rotation`]). Never shown
    /// in a response or a log line: an upstream is named by [`Config::upstream_name`].
    pub upstream_urls: Vec<String>,
    /// `UPSTREAM_SEND_URL` (secret, optional): a private transaction route (Flashbots Protect,
    /// MEV Blocker), one URL or a comma-separated list, the first preferred. Set, every
    /// transaction (a client's, and the relay's own resends) goes there and nowhere else; reads
    /// and the relay's own questions still go to `UPSTREAM_RPC_URL`
    /// ([`crate::upstream::route::RoutingTable`]). Empty: unset. Never shown in a response or a
    /// log line (`send#1 host`).
    pub upstream_send_urls: Vec<String>,
    /// `SEND_STATUS_URL` (optional; only with `UPSTREAM_SEND_URL`): each private route's status
    /// endpoint, in the order of `UPSTREAM_SEND_URL` (a comma-separated list of as many; an
    /// empty entry for a route without one), an https URL with `{hash}` where the transaction
    /// hash goes (Flashbots Protect: `https://protect.flashbots.net/tx/{hash}`). Set, tracking
    /// asks them about each pending transaction (the first route that knows it answers) and
    /// sends one the route dropped (`FAILED`, `UNKNOWN`) to the route again
    /// ([`crate::ordering::route_status`]). Empty: unset. Never shown in a log line (it may carry
    /// a key).
    pub send_status_urls: Vec<Option<String>>,
    /// `SEND_PUBLIC_AFTER_BLOCKS` (optional, at least 1; only with `UPSTREAM_SEND_URL`): the
    /// longest a client may ask its private transactions be kept from the public mempool
    /// (`?public_after_blocks=N`, [`crate::ordering::private_terms`]): one the route has not had
    /// included N blocks after tracking first saw it pending is also sent to `UPSTREAM_RPC_URL`
    /// (Flashbots' `useMempool`, bloXroute's `timeout`). Without the client's opt-in, never;
    /// unset: never for anyone.
    pub send_public_after_blocks: Option<u64>,
    /// `SEND_BROADCAST` (`none`, the default, or `all`): with several upstreams, every
    /// transaction goes to every healthy one at once instead of to the best (hedged).
    pub send_broadcast: bool,
    /// The first of `UPSTREAM_RPC_URL`: the preferred node. Never shown in a
    /// response or a log line.
    pub upstream_url: String,
    /// `CHAIN_ID`: the only chain id accepted. Unset: learned once from the upstream's `eth_chainId`.
    pub chain_id: Option<u64>,
    /// `ALLOW_UNPROTECTED_TXS` (default false): accept legacy transactions without EIP-155 chain id.
    pub allow_unprotected_txs: bool,
    /// `ENABLE_NONCE_ORDERING` (default true): route transactions through the sender's Durable
    /// Object. False forwards them directly.
    pub enable_nonce_ordering: bool,
    /// `LOCK_MAX_HOLD_MS` (default 30000): a transaction's whole budget once it holds its sender's
    /// lock, ms: its sends and their retries end by then (and a lookup that blocks the queue).
    pub lock_max_hold_ms: u64,
    /// `NONCE_GAP_WAIT_MS` (default [`crate::ordering::sender::DEFAULT_GAP_WAIT_MS`]): how long, in ms, a transaction whose
    /// nonce is above the sender's next one waits for the missing ones before it is forwarded
    /// anyway.
    pub nonce_gap_wait_ms: u64,
    /// `MAX_BATCH` (default 100): most requests in one batch.
    pub max_batch: usize,
    /// `MAX_REQUEST_BYTES` (default 4194304, 4 MiB: room for a blob transaction with six blobs):
    /// largest accepted request body.
    pub max_request_bytes: usize,
    /// `MAX_UPSTREAM_RESPONSE_BYTES` (default 16777216, 16 MiB): largest upstream answer relayed.
    pub max_upstream_response_bytes: usize,
    /// `UPSTREAM_TIMEOUT_MS` (default 60000): how long one upstream request may take, ms. A
    /// transaction's attempts together are also bounded by `LOCK_MAX_HOLD_MS`.
    pub upstream_timeout_ms: u64,
    /// `CACHE` (default `on`): clients' reads answered from the read cache ([`crate::cache`]).
    pub cache: bool,
    /// `CACHE_MAX_BYTES` (default 16777216, 16 MiB): what the read cache of one isolate may
    /// keep, every chain's answers together, bytes.
    pub cache_max_bytes: usize,
    /// `CACHE_HEAD_WATCH` (default `on`): while reads come, each isolate follows the chain's head
    /// on one upstream WebSocket ([`crate::cache::head_watch`]); with `CACHE` off, nothing.
    pub cache_head_watch: bool,
    /// `CACHE_HEAD_MS` (default 1000) and `CACHE_FINALITY_DEPTH` (default 64): the chain's
    /// cache settings ([`crate::cache::CacheSettings`]).
    /// `CACHE_BLOOM_PROOF` (default `auto`) as set; `cache_settings.proof` is its rule on
    /// `CHAIN_ID`'s chain, and on a chain id learned later the relay resolves it again
    /// ([`crate::cache::proof::Proof::rule`]).
    pub cache_proof: crate::cache::proof::Proof,
    pub cache_settings: crate::cache::CacheSettings,
    /// `GETLOGS_SPLIT`, `GETLOGS_MAX_PIECES`, `GETLOGS_MAX_RANGE`, `GETLOGS_UPSTREAM_RANGE`: how
    /// an `eth_getLogs` too wide for the upstream is asked ([`crate::upstream::logs`]).
    pub logs: LogsSettings,
    /// `MAX_HEAD_LAG` (default 2): how many blocks an upstream's head may be behind the best
    /// upstream's before it gets no reads of the tip (`latest`, `pending`), blocks.
    pub max_head_lag: u64,
    /// `UPSTREAM_RETRIES` (default `deadline`): a transaction's original bytes are sent again after
    /// an answer that says nothing about it (connection lost, timeout, HTTP 429/502/503/504, not
    /// JSON, a busy node) until its deadline (`None`), or at most this many more times (`0`: no
    /// retry). Proxied methods are not retried.
    pub upstream_retries: Option<u32>,
    /// `IDEMPOTENCY_TTL_S` (default 300) in ms: how long a sender's object answers an accepted
    /// transaction's hash again without the upstream.
    pub idempotency_ttl_ms: u64,
    /// `REPLACEMENT_POLICY` (`forward` or `reject`; unset: `reject` under a strict upstream pool,
    /// `forward` otherwise, [`PoolKind::default_replacement`]): what becomes of a different
    /// transaction with the nonce of an accepted one not known to be mined.
    pub replacement_policy: Option<ReplacementPolicy>,
    /// `UPSTREAM_POOL` (`auto`, the default: `None`; `mempool`; `strict`): whether the upstream
    /// keeps a transaction above a nonce gap ([`PoolKind`]); `auto` is strict on Hedera's
    /// chain ids 295-298 ([`PoolKind::auto`]).
    pub upstream_pool: Option<PoolKind>,
    /// `HARDFORK` (default `osaka`; `none`: `None`, no check): the fork whose stateless rules a
    /// transaction must meet before it goes to its sender's object ([`crate::hardfork`]).
    pub hardfork: Option<Hardfork>,
    /// `MAX_QUEUE_PER_SENDER` (default 64): the most transactions that may wait per sender; one
    /// more gets -32005.
    pub max_queue_per_sender: usize,
    /// `MAX_SENDER_BYTES` (default 8 MiB): the most bytes of transactions one sender's object
    /// holds in memory, whatever their state (waiting, checked by hash, being sent); past it the
    /// highest nonce waiting is refused (-32005), never the lowest.
    pub max_sender_bytes: u64,
    /// `SEND_WINDOW` (default 16, 1 to [`MAX_SEND_WINDOW`]): under `UPSTREAM_POOL=mempool`, how
    /// many of a sender's consecutive nonces may be with the upstream at once, unanswered (reth
    /// keeps 16 pooled transactions of a non-local sender, geth 64 queued per account). 1 is one
    /// at a time; a strict upstream always gets one at a time.
    pub send_window: usize,
    /// `TRACK_INTERVAL_S` (default 12, about one slot) in ms: how often a sender's pending
    /// transactions are checked; 0 turns tracking off.
    pub track_interval_ms: u64,
    /// `TRACK_TTL_S` (default 600) in ms: how long a transaction is tracked before it is given up.
    pub track_ttl_ms: u64,
    /// `SYNC_TIMEOUT_MS` (default 2000, EIP-7966's recommendation): how long a send-and-wait call
    /// waits for its receipt when it gives no timeout, ms.
    pub sync_timeout_ms: u64,
    /// `SYNC_TIMEOUT_MAX_MS` (default 30000): the longest a send-and-wait call may ask to wait, ms.
    pub sync_timeout_max_ms: u64,
    /// `ADMIN_TOKEN` (secret, optional): the bearer token of `GET /senders/{address}`; unset, that
    /// route does not exist.
    pub admin_token: Option<String>,
    /// `RELAY_SECRET` (a secret; unset: `None`): the key of the HMACs that name the read cache's
    /// answers in the data centre's Cache API ([`crate::relay::cached::shared_key`]).
    pub relay_secret: Option<RelaySecret>,
    /// `RELAY_SECRET_PREVIOUS` (a secret; unset: `None`): the secret `RELAY_SECRET` replaced;
    /// an API key made under it is looked up under it when the current one does not know it.
    pub relay_secret_previous: Option<RelaySecret>,
    /// `KEYLESS` (default `open`): who may call without an API key, where keys are on.
    pub keyless: crate::access::keys::Keyless,
    /// `CORS_ORIGINS` (default `*`): the origins whose pages may read the answers.
    pub cors_origins: CorsOrigins,
    /// `METHOD_ALLOWLIST` and `METHOD_DENYLIST`: the methods passed on (see
    /// [`crate::access::methods`]).
    pub methods: MethodPolicy,
    /// `RATE_LIMIT_PERIOD_S` (default 60): the period of the rate limit bindings, s, sent as
    /// `Retry-After` with a refusal; keep it equal to their `simple.period`.
    pub rate_limit_period_s: u64,
    /// `UPSTREAM_WS_URL` (secret, optional): the upstream WebSocket(s) that serve `eth_subscribe`
    /// to WebSocket clients, a comma-separated list tried in order; default: each of
    /// `UPSTREAM_RPC_URL` with its scheme changed to ws/wss ([`crate::websocket::ws_url_of`]).
    /// Never shown, as `UPSTREAM_RPC_URL`.
    pub upstream_ws_urls: Vec<String>,
    /// `WS_MAX_SUBSCRIPTIONS`, `WS_MAX_MESSAGE_BYTES`, `WS_IDLE_TIMEOUT_S`,
    /// `WS_UPSTREAM_RECONNECT_MS`, `WS_MAX_CONNECTION_BYTES`, `WS_MAX_ISOLATE_BYTES`: the
    /// WebSocket connections' limits.
    pub socket: SocketLimits,
    /// The served chain (`CHAINS`) these settings are, whose senders' Durable Objects are named
    /// `{id}:{sender}` ([`Config::object_name`]); `None` for the default chain (`CHAIN_ID`,
    /// served at `/`), whose objects keep the sender's address alone, as before chains.
    pub named_chain: Option<u64>,
    /// The parts of the upstream URLs and `SEND_STATUS_URL` never to show (see [`Config::redact`]), longest first.
    secrets: Vec<String>,
}

/// A setting that could not be read: the setting's name, the chain it was read for, and what
/// was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The setting's name ([`settings::About::name`]).
    pub name: &'static str,
    /// The served chain whose setting it is (`CHAIN_<id>_NAME`, or `NAME` as its default);
    /// `None`: the deployment's, or the default chain's.
    pub chain: Option<u64>,
    /// What was wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// An error of setting `name` of the deployment or the default chain.
    pub fn new(name: &'static str, problem: impl Into<String>) -> Self {
        ConfigError {
            name,
            chain: None,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.chain {
            None => write!(f, "relay misconfigured: {} {}", self.name, self.problem),
            Some(id) => write!(
                f,
                "relay misconfigured: chain {id}: {} {}",
                self.name, self.problem
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The largest `SEND_WINDOW`: geth's queue of one account (`AccountQueue`, 64).
pub const MAX_SEND_WINDOW: usize = 64;

/// How an `eth_getLogs` too wide for the upstream is asked ([`crate::upstream::logs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogsSettings {
    /// `GETLOGS_SPLIT` (default on): split, or give the client the provider's refusal.
    pub split: bool,
    /// `GETLOGS_MAX_PIECES` (default 40): the most pieces of one request.
    pub max_pieces: usize,
    /// `GETLOGS_MAX_RANGE` (unset): the most blocks a split request may span.
    pub max_range: Option<u64>,
    /// `GETLOGS_UPSTREAM_RANGE` (unset): the upstreams' known range caps, blocks per query.
    pub upstream_range: crate::upstream::logs::limits::UpstreamRanges,
}

/// The deployment's secret (`RELAY_SECRET`): its bytes never appear in a log, a metric or an
/// answer (its `Debug` says nothing of them).
#[derive(Clone, PartialEq, Eq)]
pub struct RelaySecret(String);

impl RelaySecret {
    /// The secret `value`.
    pub fn new(value: &str) -> Self {
        RelaySecret(value.to_string())
    }

    /// Its bytes, as an HMAC key.
    pub fn bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl std::fmt::Debug for RelaySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelaySecret(..)")
    }
}

impl Config {
    /// This chain's key in the isolate's per-chain state (the read cache,
    /// [`crate::cache::ReadCache`]; the upstreams' health, heads and batch limits): its chain
    /// id, 0 when `CHAIN_ID` is unset (one chain only, then).
    pub fn chain_key(&self) -> u64 {
        self.chain_id.unwrap_or(0)
    }

    /// Reads the settings through `get` (the variable's value, `None` when unset; an empty value
    /// counts as unset).
    ///
    /// # Errors
    /// [`ConfigError`] for a missing `UPSTREAM_RPC_URL` or a value that does not parse.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        Self::read(&settings::Vars::top(&get))
    }

    /// Reads the settings of served chain `id` (not the default chain) through `get`: each
    /// chain's setting from `CHAIN_<id>_NAME`, else (for those [`settings::Scope::Chain`]) from
    /// `NAME`; its upstreams and route only from its own; its `CHAIN_ID` is `id`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the chain and the setting.
    pub fn for_chain(get: impl Fn(&str) -> Option<String>, id: u64) -> Result<Config, ConfigError> {
        Self::read(&settings::Vars::chain(&get, id)).map(|mut config| {
            config.named_chain = Some(id);
            config
        })
    }

    /// Reads one chain's settings ([`settings::Vars`]); an error names that chain.
    fn read(vars: &settings::Vars) -> Result<Config, ConfigError> {
        Self::read_unnamed(vars).map_err(|e| ConfigError {
            chain: vars.chain_id(),
            ..e
        })
    }

    /// Reads the `GETLOGS_*` settings of a chain of `upstreams` upstreams (`UPSTREAM_RPC_URL`).
    ///
    /// # Errors
    /// [`ConfigError`] of the first that does not read; of `GETLOGS_UPSTREAM_RANGE` when it
    /// lists caps but not one per upstream.
    fn read_logs(get: &settings::Vars, upstreams: usize) -> Result<LogsSettings, ConfigError> {
        use settings as s;
        let upstream_range = s::GETLOGS_UPSTREAM_RANGE.read(get)?;
        if !upstream_range.fits(upstreams) {
            return Err(ConfigError::new(
                "GETLOGS_UPSTREAM_RANGE",
                format!("must give one cap for all or one per upstream in UPSTREAM_RPC_URL's order ({upstreams})"),
            ));
        }
        Ok(LogsSettings {
            split: s::GETLOGS_SPLIT.read(get)?,
            max_pieces: s::GETLOGS_MAX_PIECES.read(get)?,
            max_range: s::GETLOGS_MAX_RANGE.read(get)?,
            upstream_range,
        })
    }

    /// Reads one chain's settings through `get` as written: its upstreams and private routes
    /// first ([`Config::read_upstreams`]), then the WebSocket limits, then the others in the
    /// order of the fields below. An error is the first setting that does not read.
    fn read_unnamed(get: &settings::Vars) -> Result<Config, ConfigError> {
        use settings as s;
        let upstreams = Self::read_upstreams(get)?;
        let socket = Self::read_socket(get)?;
        Ok(Config {
            chain_id: s::CHAIN_ID.read(get)?,
            allow_unprotected_txs: s::ALLOW_UNPROTECTED_TXS.read(get)?,
            enable_nonce_ordering: s::ENABLE_NONCE_ORDERING.read(get)?,
            lock_max_hold_ms: s::LOCK_MAX_HOLD_MS.read(get)?,
            nonce_gap_wait_ms: s::NONCE_GAP_WAIT_MS.read(get)?,
            max_batch: s::MAX_BATCH.read(get)?,
            max_request_bytes: s::MAX_REQUEST_BYTES.read(get)?,
            max_upstream_response_bytes: s::MAX_UPSTREAM_RESPONSE_BYTES.read(get)?,
            upstream_timeout_ms: s::UPSTREAM_TIMEOUT_MS.read(get)?,
            max_head_lag: s::MAX_HEAD_LAG.read(get)?,
            cache: s::CACHE.read(get)?,
            cache_max_bytes: s::CACHE_MAX_BYTES.read(get)?,
            cache_head_watch: s::CACHE_HEAD_WATCH.read(get)?,
            cache_proof: s::CACHE_BLOOM_PROOF.read(get)?,
            cache_settings: crate::cache::CacheSettings {
                head_ms: s::CACHE_HEAD_MS.read(get)?,
                finality: s::CACHE_FINALITY.read(get)?,
                finality_depth: s::CACHE_FINALITY_DEPTH.read(get)?,
                proof: s::CACHE_BLOOM_PROOF.read(get)?.rule(s::CHAIN_ID.read(get)?),
            },
            logs: Self::read_logs(get, upstreams.upstream_urls.len())?,
            upstream_retries: s::UPSTREAM_RETRIES.read(get)?,
            idempotency_ttl_ms: s::IDEMPOTENCY_TTL_S.read(get)?,
            replacement_policy: s::REPLACEMENT_POLICY.read(get)?,
            upstream_pool: s::UPSTREAM_POOL.read(get)?,
            hardfork: s::HARDFORK.read(get)?,
            max_queue_per_sender: s::MAX_QUEUE_PER_SENDER.read(get)?,
            max_sender_bytes: s::MAX_SENDER_BYTES.read(get)?,
            send_window: s::SEND_WINDOW.read(get)?,
            track_interval_ms: s::TRACK_INTERVAL_S.read(get)?,
            track_ttl_ms: s::TRACK_TTL_S.read(get)?,
            sync_timeout_ms: s::SYNC_TIMEOUT_MS.read(get)?,
            sync_timeout_max_ms: s::SYNC_TIMEOUT_MAX_MS.read(get)?,
            admin_token: s::ADMIN_TOKEN.read(get)?,
            relay_secret: s::RELAY_SECRET.read(get)?,
            relay_secret_previous: s::RELAY_SECRET_PREVIOUS.read(get)?,
            keyless: s::KEYLESS.read(get)?,
            cors_origins: s::CORS_ORIGINS.read(get)?,
            methods: MethodPolicy {
                allow: s::METHOD_ALLOWLIST.read(get)?,
                deny: s::METHOD_DENYLIST.read(get)?,
            },
            rate_limit_period_s: s::RATE_LIMIT_PERIOD_S.read(get)?,
            send_broadcast: s::SEND_BROADCAST.read(get)?,
            secrets: upstreams.secrets(),
            named_chain: None,
            send_status_urls: upstreams.send_status_urls,
            send_public_after_blocks: upstreams.send_public_after_blocks,
            upstream_urls: upstreams.upstream_urls,
            upstream_send_urls: upstreams.upstream_send_urls,
            upstream_ws_urls: upstreams.upstream_ws_urls,
            socket,
            upstream_url: upstreams.upstream_url,
        })
    }

    /// Reads where requests go, in this order: `UPSTREAM_RPC_URL` (at least one URL),
    /// `UPSTREAM_SEND_URL`, `SEND_STATUS_URL` ([`Config::read_send_status_urls`]),
    /// `SEND_PUBLIC_AFTER_BLOCKS` (these two only with a private route), `UPSTREAM_WS_URL`
    /// (default: each upstream's as a WebSocket URL).
    ///
    /// # Errors
    /// [`ConfigError`] of the first that does not read, or of a private route's setting
    /// without `UPSTREAM_SEND_URL`.
    fn read_upstreams(get: &settings::Vars) -> Result<Upstreams, ConfigError> {
        use settings as s;
        let upstream_urls = HTTP_URLS.list("UPSTREAM_RPC_URL", &s::UPSTREAM_RPC_URL.read(get)?)?;
        if upstream_urls.is_empty() {
            return Err(HTTP_URLS.error("UPSTREAM_RPC_URL"));
        }
        let upstream_send_urls = match s::UPSTREAM_SEND_URL.read(get)? {
            Some(listed) => ROUTE_URLS.list("UPSTREAM_SEND_URL", &listed)?,
            None => Vec::new(),
        };
        let send_status_urls = Self::read_send_status_urls(get, &upstream_send_urls)?;
        let send_public_after_blocks = s::SEND_PUBLIC_AFTER_BLOCKS.read(get)?;
        for (name, set) in [
            ("SEND_STATUS_URL", !send_status_urls.is_empty()),
            (
                "SEND_PUBLIC_AFTER_BLOCKS",
                send_public_after_blocks.is_some(),
            ),
        ] {
            if set && upstream_send_urls.is_empty() {
                return Err(ConfigError::new(
                    name,
                    "is for a private route: set UPSTREAM_SEND_URL too",
                ));
            }
        }
        let upstream_url = upstream_urls[0].clone();
        let upstream_ws_urls: Vec<String> = match s::UPSTREAM_WS_URL.read(get)? {
            None => upstream_urls
                .iter()
                .map(|u| crate::websocket::ws_url_of(u))
                .collect(),
            Some(listed) => WS_URLS.list("UPSTREAM_WS_URL", &listed)?,
        };
        Ok(Upstreams {
            upstream_urls,
            upstream_send_urls,
            send_status_urls,
            send_public_after_blocks,
            upstream_ws_urls,
            upstream_url,
        })
    }

    /// Reads `SEND_STATUS_URL`: one entry per private route of `upstream_send_urls`, in their
    /// order (`None` for an empty entry; any count while `UPSTREAM_SEND_URL` is unset); empty
    /// when unset.
    ///
    /// # Errors
    /// [`ConfigError`] of `SEND_STATUS_URL` for an entry that is no route URL with `{hash}`, or
    /// for a count other than the routes'.
    fn read_send_status_urls(
        get: &settings::Vars,
        upstream_send_urls: &[String],
    ) -> Result<Vec<Option<String>>, ConfigError> {
        Ok(match settings::SEND_STATUS_URL.read(get)? {
            None => Vec::new(),
            Some(listed) => {
                let urls: Vec<Option<String>> = listed
                    .split(',')
                    .map(|url| Some(url.trim().to_string()).filter(|u| !u.is_empty()))
                    .collect();
                let bad = |problem: String| ConfigError::new("SEND_STATUS_URL", problem);
                for url in urls.iter().flatten() {
                    if !ROUTE_URLS.accepts(url) || !url.contains("{hash}") {
                        return Err(bad("must be https:// URLs (http:// only to 127.0.0.1, \
                                        localhost or [::1]) with {hash} where the transaction \
                                        hash goes"
                            .into()));
                    }
                }
                if !upstream_send_urls.is_empty() && urls.len() != upstream_send_urls.len() {
                    return Err(bad(format!(
                        "lists {} status URLs for {} routes in UPSTREAM_SEND_URL: give one per \
                         route, in the same order (an empty entry for a route without one)",
                        urls.len(),
                        upstream_send_urls.len()
                    )));
                }
                urls
            }
        })
    }

    /// Reads the WebSocket connections' limits, in this order: `WS_MAX_SUBSCRIPTIONS`,
    /// `WS_MAX_MESSAGE_BYTES`, `WS_IDLE_TIMEOUT_S` (in ms), `WS_UPSTREAM_RECONNECT_MS`,
    /// `WS_MAX_CONNECTION_BYTES`, `WS_MAX_ISOLATE_BYTES`.
    ///
    /// # Errors
    /// [`ConfigError`] of the first that does not parse.
    fn read_socket(get: &settings::Vars) -> Result<SocketLimits, ConfigError> {
        use settings as s;
        Ok(SocketLimits {
            max_subscriptions: s::WS_MAX_SUBSCRIPTIONS.read(get)?,
            max_message_bytes: s::WS_MAX_MESSAGE_BYTES.read(get)?,
            idle_timeout_ms: s::WS_IDLE_TIMEOUT_S.read(get)?,
            upstream_reconnect_ms: s::WS_UPSTREAM_RECONNECT_MS.read(get)?,
            max_connection_bytes: s::WS_MAX_CONNECTION_BYTES.read(get)?,
            max_isolate_bytes: s::WS_MAX_ISOLATE_BYTES.read(get)?,
        })
    }

    /// The name of `sender`'s Durable Object on this chain: the lowercase address on the
    /// default chain (as before chains), `{id}:{address}` on another served chain.
    pub fn object_name(&self, sender: &str) -> String {
        chains::object_name(self.named_chain, sender)
    }

    /// The upstream pool when it is known: `UPSTREAM_POOL`, or for `auto` the pool of the chain
    /// `chain_id` (or `CHAIN_ID`); `None` for `auto` while no chain id is known. A sender's
    /// object sends nothing on a guessed pool: with stored transactions and this `None` it learns
    /// the chain id first.
    pub fn known_pool_kind(&self, chain_id: Option<u64>) -> Option<PoolKind> {
        match (self.upstream_pool, chain_id.or(self.chain_id)) {
            (Some(pool), _) => Some(pool),
            (None, Some(id)) => Some(PoolKind::auto(Some(id))),
            (None, None) => None,
        }
    }

    /// The upstream pool on the chain `chain_id` (`CHAIN_ID`, or the one the Worker learned;
    /// `None` while unknown): [`Config::known_pool_kind`], the one resolver of `auto`, or while
    /// no chain id is known [`PoolKind::auto`]'s guess (a mempool).
    pub fn pool_kind_for(&self, chain_id: Option<u64>) -> PoolKind {
        self.known_pool_kind(chain_id)
            .unwrap_or_else(|| PoolKind::auto(None))
    }

    /// The URLs of a set of upstreams, in preference order.
    pub fn upstreams(&self, set: UpstreamSet) -> &[String] {
        match set {
            UpstreamSet::Send if !self.upstream_send_urls.is_empty() => &self.upstream_send_urls,
            UpstreamSet::Rpc | UpstreamSet::Send => &self.upstream_urls,
        }
    }

    /// Whether transactions go to a private route (`UPSTREAM_SEND_URL` is set).
    pub fn private_route(&self) -> bool {
        !self.upstream_send_urls.is_empty()
    }

    /// Whether a private route has a status URL (`SEND_STATUS_URL`).
    pub fn route_status(&self) -> bool {
        self.send_status_urls.iter().any(Option::is_some)
    }

    /// How logs name the upstream at `url`: `#2 node.example:8545` in `UPSTREAM_RPC_URL`,
    /// `send#1 relay.example` in `UPSTREAM_SEND_URL` (its host only, as [`Config::upstream_name`]).
    pub fn upstream_label(&self, url: &str) -> String {
        if let Some(index) = self.upstream_urls.iter().position(|u| u == url) {
            return self.upstream_name(index);
        }
        let index = self
            .upstream_send_urls
            .iter()
            .position(|u| u == url)
            .unwrap_or(0);
        format!("send#{} {}", index + 1, redact::host_of(url))
    }

    /// The settings of each sender's state in its Durable Object on the chain `chain_id` (see
    /// [`Config::pool_kind_for`]).
    pub fn sender_settings(&self, chain_id: Option<u64>) -> Settings {
        let pool = self.pool_kind_for(chain_id);
        Settings {
            gap_wait_ms: self.nonce_gap_wait_ms,
            max_queue: self.max_queue_per_sender,
            max_bytes: self.max_sender_bytes,
            send_window: self.send_window,
            idempotency_ttl_ms: self.idempotency_ttl_ms,
            replacement: self
                .replacement_policy
                .unwrap_or_else(|| pool.default_replacement()),
            max_hold_ms: self.lock_max_hold_ms,
            track_interval_ms: self.track_interval_ms,
            track_ttl_ms: self.track_ttl_ms,
            pool,
            private_route: self.private_route(),
            route_status: self.route_status(),
            public_after_blocks: self.send_public_after_blocks,
        }
    }

    /// How logs, metrics and answers name upstream `index`: its position (from 1) and host, as
    /// `#2 node.example:8545`, never its path, query or credentials.
    pub fn upstream_name(&self, index: usize) -> String {
        let url = self.upstream_urls.get(index).map_or("", String::as_str);
        format!("#{} {}", index + 1, redact::host_of(url))
    }

    /// How logs name WebSocket upstream `index` (of `UPSTREAM_WS_URL`): `ws#2 node.example:8546`,
    /// as [`Config::upstream_name`].
    pub fn upstream_ws_name(&self, index: usize) -> String {
        let url = self.upstream_ws_urls.get(index).map_or("", String::as_str);
        format!("ws#{} {}", index + 1, redact::host_of(url))
    }

    /// The retry budget of a transaction's sends and of lookups.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_retries: self.upstream_retries,
            ..RetryPolicy::until_deadline(self.upstream_timeout_ms)
        }
    }
}

/// Where one chain's requests go, as read ([`Config::read_upstreams`]): [`Config`]'s fields of
/// the same names.
struct Upstreams {
    /// `UPSTREAM_RPC_URL`: at least one.
    upstream_urls: Vec<String>,
    /// `UPSTREAM_SEND_URL`: empty when unset.
    upstream_send_urls: Vec<String>,
    /// `SEND_STATUS_URL`: one per private route, `None` for a route without one; empty when
    /// unset.
    send_status_urls: Vec<Option<String>>,
    /// `SEND_PUBLIC_AFTER_BLOCKS`, blocks.
    send_public_after_blocks: Option<u64>,
    /// `UPSTREAM_WS_URL`, or each of `upstream_urls` as a WebSocket URL.
    upstream_ws_urls: Vec<String>,
    /// The first of `upstream_urls`.
    upstream_url: String,
}

impl Upstreams {
    /// The parts of every upstream, route and status URL never to show, longest first
    /// ([`Config::redact`]).
    fn secrets(&self) -> Vec<String> {
        redact::secrets_of_all(
            &[
                self.upstream_urls.as_slice(),
                self.upstream_ws_urls.as_slice(),
                self.upstream_send_urls.as_slice(),
            ]
            .concat(),
            &self
                .send_status_urls
                .iter()
                .flatten()
                .cloned()
                .collect::<Vec<_>>(),
        )
    }
}

/// What an upstream URL setting accepts: the schemes, and what its error says otherwise.
struct UrlKind {
    schemes: [&'static str; 2],
    /// A scheme of `schemes` accepted only for a loopback host (`127.0.0.1`, `localhost`,
    /// `[::1]`): plain HTTP to a private route, for tests.
    loopback_only: Option<&'static str>,
    problem: &'static str,
}

/// An HTTP upstream URL (`UPSTREAM_RPC_URL`).
const HTTP_URLS: UrlKind = UrlKind {
    schemes: ["http://", "https://"],
    loopback_only: None,
    problem: "must be an http:// or https:// URL, or a comma-separated list of them",
};

/// A private route's URL (`UPSTREAM_SEND_URL`, `SEND_STATUS_URL`): HTTPS, since what goes there
/// must reach the route alone, unread on the way (plain HTTP only to a loopback host, for tests).
const ROUTE_URLS: UrlKind = UrlKind {
    schemes: ["http://", "https://"],
    loopback_only: Some("http://"),
    problem: "must be an https:// URL, or a comma-separated list of them (http:// only to \
              127.0.0.1, localhost or [::1])",
};

/// A WebSocket upstream URL (`UPSTREAM_WS_URL`).
const WS_URLS: UrlKind = UrlKind {
    schemes: ["ws://", "wss://"],
    loopback_only: None,
    problem: "must be a ws:// or wss:// URL, or a comma-separated list of them",
};

impl UrlKind {
    /// The error of setting `name`.
    fn error(&self, name: &'static str) -> ConfigError {
        ConfigError::new(name, self.problem)
    }

    /// Whether `url` starts with one of the schemes (the loopback-only one with a loopback
    /// host).
    fn accepts(&self, url: &str) -> bool {
        self.schemes
            .iter()
            .any(|scheme| match url.strip_prefix(scheme) {
                None => false,
                Some(rest) if self.loopback_only == Some(*scheme) => {
                    ["127.0.0.1", "localhost", "[::1]"].iter().any(|host| {
                        rest.strip_prefix(host)
                            .is_some_and(|after| after.is_empty() || after.starts_with([':', '/']))
                    })
                }
                Some(_) => true,
            })
    }

    /// The URLs of setting `name`'s `listed` value (a comma-separated list, blanks dropped).
    ///
    /// # Errors
    /// [`UrlKind::error`] when one starts with none of the schemes.
    fn list(&self, name: &'static str, listed: &str) -> Result<Vec<String>, ConfigError> {
        let urls = url_list(listed);
        if urls.iter().all(|u| self.accepts(u)) {
            Ok(urls)
        } else {
            Err(self.error(name))
        }
    }
}

/// The URLs of a comma-separated list, trimmed, empty ones left out.
fn url_list(listed: &str) -> Vec<String> {
    listed
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

pub mod chain_entry;
pub mod chains;
mod redact;
pub mod settings;
#[cfg(test)]
mod tests;
