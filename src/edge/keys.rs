//! API keys at the Worker (wasm32 only): the isolate's leases of each key's units, asked of the
//! key's Durable Object ([`crate::edge::key_authority`]) after its KV entry says the key exists
//! ([`identify`]), and spent one unit per request member ([`spend`]). Keys are on when the
//! deployment has a `KEYS` KV binding, the `KEY_AUTHORITY` object binding and `RELAY_SECRET`
//! ([`keys_on`]).
//!
//! What a key is checked against, and when: its existence in KV (a miss is refused, HTTP 401, and
//! remembered [`UNKNOWN_HOLD_MS`] by the isolate), its status and budget at its object with each
//! lease (at most [`LEASE_MS`] old: a revoked key stops within it, whatever KV still says). KV or
//! the object unreachable, with no lease held: refused (HTTP 503), reads and sends alike.

use crate::access::keys::authority::{LeaseAnswer, LeaseAsk};
use crate::access::keys::budget::{Held, LEASE_MS};
use crate::access::keys::key::{ApiKey, KeyHash};
use crate::access::keys::{KeyRecord, Refusal};
use crate::config::Config;
use crate::edge::key_authority::LEASE_PATH;
use crate::edge::runtime::now_ms;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use worker::{Env, Method, Request, RequestInit};

/// The Workers KV binding of the keys' records.
pub const KEYS_BINDING: &str = "KEYS";
/// The Durable Object binding of the keys' authorities.
pub const KEY_AUTHORITY_BINDING: &str = "KEY_AUTHORITY";
/// Units a first lease asks for.
const FIRST_WANT: u64 = 20;
/// How long an isolate remembers that a key is unknown or revoked, ms.
pub const UNKNOWN_HOLD_MS: u64 = LEASE_MS;
/// The most keys an isolate holds anything of; past it, what ended is forgotten first, then all.
const MAX_KNOWN: usize = 10_000;

/// What an isolate knows of one key.
enum Known {
    /// A lease, the record it came with, and the sends and reads made since the last ask.
    Held {
        record: Rc<KeyRecord>,
        held: Held,
        sends: u64,
        reads: u64,
    },
    /// Refused until `until_ms`.
    Refused { until_ms: u64, why: Refusal },
}

thread_local! {
    /// The isolate's leases by key hash.
    static KNOWN: RefCell<HashMap<KeyHash, Known>> = RefCell::new(HashMap::new());
}

/// Whether API keys are on: the `KEYS` KV binding, the `KEY_AUTHORITY` binding and
/// `RELAY_SECRET` are all there.
pub fn keys_on(env: &Env, config: &Config) -> bool {
    config.relay_secret.is_some()
        && env.kv(KEYS_BINDING).is_ok()
        && env.durable_object(KEY_AUTHORITY_BINDING).is_ok()
}

/// A request's key, admitted: its hash (its id for logs and limits) and its record.
pub struct Admitted {
    /// The key's hash.
    pub hash: KeyHash,
    /// Its record as its object last said it.
    pub record: Rc<KeyRecord>,
}

/// Admits `key` (keys on: [`keys_on`]): the record of a lease held, else a new lease from the
/// key's object once KV says the key exists. The key is looked up by its hash under
/// `RELAY_SECRET`, then, unknown there, under `RELAY_SECRET_PREVIOUS` (a key made before the
/// secret was rotated keeps its hash, its record and its object).
///
/// # Errors
/// [`Refusal::Unknown`], [`Refusal::Revoked`], [`Refusal::Unavailable`].
pub async fn identify(env: &Env, config: &Config, key: &ApiKey) -> Result<Admitted, Refusal> {
    let secret = config.relay_secret.as_ref().ok_or(Refusal::Unavailable)?;
    let current = identify_hash(env, key.hash(secret.bytes())).await;
    match (&current, &config.relay_secret_previous) {
        (Err(Refusal::Unknown), Some(previous)) => {
            identify_hash(env, key.hash(previous.bytes())).await
        }
        _ => current,
    }
}

/// [`identify`] under one secret: the key's hash `hash`.
async fn identify_hash(env: &Env, hash: KeyHash) -> Result<Admitted, Refusal> {
    let now = now_ms();
    let known = KNOWN.with(|k| match k.borrow().get(&hash) {
        Some(Known::Held { record, held, .. }) if now < held.lease.expires_ms => {
            Some(Ok(record.clone()))
        }
        Some(Known::Refused { until_ms, why }) if now < *until_ms => Some(Err(why.clone())),
        _ => None,
    });
    let record = match known {
        Some(known) => known?,
        None => renew(env, &hash, FIRST_WANT).await?,
    };
    Ok(Admitted { hash, record })
}

/// Spends `sends + reads` units of the key `hash`'s lease, asking its object for the next when
/// the lease is spent or has ended.
///
/// # Errors
/// [`Refusal::OverBudget`] with its reset time; [`identify`]'s.
pub async fn spend(env: &Env, hash: &KeyHash, sends: u64, reads: u64) -> Result<(), Refusal> {
    let units = sends + reads;
    let now = now_ms();
    if take(hash, sends, reads, units, now) {
        return Ok(());
    }
    // A lease of no units (the budget was spent) is the answer until it ends: a client that
    // keeps asking costs its key's object one ask per isolate and lease, not one per request.
    if let Some(reset_ms) = spent_until(hash, now) {
        return Err(Refusal::OverBudget {
            reset_ms,
            now_ms: now,
        });
    }
    renew(env, hash, units.max(FIRST_WANT)).await?;
    let now = now_ms();
    if take(hash, sends, reads, units, now) {
        return Ok(());
    }
    let reset_ms = KNOWN.with(|k| match k.borrow().get(hash) {
        Some(Known::Held { held, .. }) => held.lease.reset_ms,
        _ => None,
    });
    Err(Refusal::OverBudget {
        reset_ms: reset_ms.unwrap_or(now + LEASE_MS),
        now_ms: now,
    })
}

/// The `key_usage` line of `sends` and `reads` spent with the key `hash` (by its id, never the
/// key): label `ok`, `over_budget` or `refused`, as `refused` says (docs/metrics.md).
pub fn usage_metric(
    hash: &KeyHash,
    sends: u64,
    reads: u64,
    refused: Option<&Refusal>,
) -> crate::metrics::Metric {
    let label = match refused {
        None => "ok",
        Some(Refusal::OverBudget { .. }) => "over_budget",
        Some(_) => "refused",
    };
    crate::metrics::Metric::new("key_usage", "", label.to_string())
        .value("sends", sends as f64)
        .value("reads", reads as f64)
        .field("key_id", hash.id())
}

/// When the lease held for `hash` ends (Unix ms); `None` when none is held (a refusal is
/// remembered, or nothing).
pub fn lease_ends(hash: &KeyHash) -> Option<u64> {
    KNOWN.with(|k| match k.borrow().get(hash) {
        Some(Known::Held { held, .. }) => Some(held.lease.expires_ms),
        _ => None,
    })
}

/// The reset time of the lease held for `hash` at `now_ms` when it was granted no units (the
/// budget spent) and has not ended.
fn spent_until(hash: &KeyHash, now_ms: u64) -> Option<u64> {
    KNOWN.with(|k| match k.borrow().get(hash) {
        Some(Known::Held { held, .. })
            if held.lease.units == 0 && now_ms < held.lease.expires_ms =>
        {
            held.lease.reset_ms
        }
        _ => None,
    })
}

/// Takes `units` of the lease held for `hash` at `now_ms` when it has them (counting the sends
/// and reads); `false` when it has not, or none is held.
fn take(hash: &KeyHash, sends: u64, reads: u64, units: u64, now_ms: u64) -> bool {
    KNOWN.with(|k| match k.borrow_mut().get_mut(hash) {
        Some(Known::Held {
            held,
            sends: s,
            reads: r,
            ..
        }) if now_ms < held.lease.expires_ms && held.unspent() >= units => {
            held.spent += units;
            *s += sends;
            *r += reads;
            true
        }
        _ => false,
    })
}

/// Asks the key `hash`'s object for a lease of `want` units, giving back what the last one did
/// not spend; the key's KV record goes with the first ask (the object takes it only when it has
/// none). Returns the record.
async fn renew(env: &Env, hash: &KeyHash, want: u64) -> Result<Rc<KeyRecord>, Refusal> {
    // The lease held stays (its record still admits the requests that come meanwhile, without
    // a KV read each), emptied: what it did not spend goes back with this ask.
    let previous = KNOWN.with(|k| match k.borrow_mut().get_mut(hash) {
        Some(Known::Held {
            held, sends, reads, ..
        }) => {
            let back = (held.unspent(), held.lease.granted_ms, *sends, *reads);
            let used = held.spent;
            held.spent = held.lease.units;
            (*sends, *reads) = (0, 0);
            Some((back, used))
        }
        _ => None,
    });
    let ((returned, returned_from_ms, sends, reads), used) = previous.unwrap_or_default();
    let record = match previous {
        Some(_) => None,
        None => Some(kv_record(env, hash).await?),
    };
    let ask = LeaseAsk {
        // Twice what the last lease served: a burst gets leases that grow with it.
        want: want.max(used.saturating_mul(2)),
        returned,
        returned_from_ms,
        sends,
        reads,
        record,
    };
    let answer = ask_lease(env, hash, &ask).await?;
    match answer {
        LeaseAnswer::Granted { record, lease } => {
            let record = Rc::new(*record);
            let held = merged(hash, Held { lease, spent: 0 });
            remember(
                hash,
                Known::Held {
                    record: record.clone(),
                    held: held.0,
                    sends: held.1,
                    reads: held.2,
                },
            );
            Ok(record)
        }
        LeaseAnswer::Revoked => Err(refused(hash, Refusal::Revoked)),
        LeaseAnswer::Unknown => Err(refused(hash, Refusal::Unknown)),
    }
}

/// `new` with the lease of `hash` another request of this isolate got while this one asked
/// (two renewals at once): their units together, ending with the sooner, given back as of the
/// older grant, so that no unit granted is lost; and that lease's sends and reads. A lease held
/// with no unit left (the one this ask emptied) is replaced.
fn merged(hash: &KeyHash, new: Held) -> (Held, u64, u64) {
    KNOWN.with(|k| match k.borrow().get(hash) {
        Some(Known::Held {
            held, sends, reads, ..
        }) if held.unspent() > 0 => {
            let lease = crate::access::keys::budget::Lease {
                units: held.unspent() + new.lease.units,
                expires_ms: held.lease.expires_ms.min(new.lease.expires_ms),
                granted_ms: held.lease.granted_ms.min(new.lease.granted_ms),
                reset_ms: new.lease.reset_ms,
            };
            (Held { lease, spent: 0 }, *sends, *reads)
        }
        // An emptied one (its units given back): the new lease alone, with its counts.
        Some(Known::Held { sends, reads, .. }) => (new, *sends, *reads),
        _ => (new, 0, 0),
    })
}

/// `why`, remembered for `hash` [`UNKNOWN_HOLD_MS`] (the isolate asks nothing of that key
/// meanwhile).
fn refused(hash: &KeyHash, why: Refusal) -> Refusal {
    let until_ms = now_ms() + UNKNOWN_HOLD_MS;
    remember(
        hash,
        Known::Refused {
            until_ms,
            why: why.clone(),
        },
    );
    why
}

/// Keeps what the isolate knows of `hash`, within [`MAX_KNOWN`] keys.
fn remember(hash: &KeyHash, known: Known) {
    let now = now_ms();
    KNOWN.with(|k| {
        let mut k = k.borrow_mut();
        if k.len() >= MAX_KNOWN {
            k.retain(|_, v| match v {
                Known::Held { held, .. } => now < held.lease.expires_ms,
                Known::Refused { until_ms, .. } => now < *until_ms,
            });
            if k.len() >= MAX_KNOWN {
                k.clear();
            }
        }
        k.insert(hash.clone(), known);
    });
}

/// The key `hash`'s KV record.
///
/// # Errors
/// [`Refusal::Unknown`] (remembered [`UNKNOWN_HOLD_MS`]) when there is none,
/// [`Refusal::Unavailable`] when KV cannot be read.
async fn kv_record(env: &Env, hash: &KeyHash) -> Result<KeyRecord, Refusal> {
    let kv = env.kv(KEYS_BINDING).map_err(|_| Refusal::Unavailable)?;
    match kv.get(&hash.kv_name()).json::<KeyRecord>().await {
        Ok(Some(record)) => Ok(record),
        Ok(None) => Err(refused(hash, Refusal::Unknown)),
        Err(_) => Err(Refusal::Unavailable),
    }
}

/// Calls the key `hash`'s object: `method` on `path` with an optional JSON body; its answer's
/// text (HTTP 200), else `None`.
pub async fn call_authority(
    env: &Env,
    hash: &KeyHash,
    method: Method,
    path: &str,
    body: Option<String>,
) -> Option<String> {
    let stub = env
        .durable_object(KEY_AUTHORITY_BINDING)
        .and_then(|ns| ns.get_by_name(&hash.object_name()))
        .ok()?;
    let mut init = RequestInit::new();
    init.with_method(method);
    if let Some(body) = body {
        init.with_body(Some(body.into()));
    }
    let req = Request::new_with_init(&format!("https://key-authority{path}"), &init).ok()?;
    let mut response = stub.fetch_with_request(req).await.ok()?;
    if response.status_code() != 200 {
        return None;
    }
    response.text().await.ok()
}

/// The object's answer to `ask`.
async fn ask_lease(env: &Env, hash: &KeyHash, ask: &LeaseAsk) -> Result<LeaseAnswer, Refusal> {
    let body = serde_json::to_string(ask).map_err(|_| Refusal::Unavailable)?;
    let text = call_authority(env, hash, Method::Post, LEASE_PATH, Some(body))
        .await
        .ok_or(Refusal::Unavailable)?;
    serde_json::from_str(&text).map_err(|_| Refusal::Unavailable)
}

/// What a request may do by its key, once admitted ([`admit`]).
#[derive(Default)]
pub struct Access {
    /// Its key, admitted; `None` for a request without one (or with keys off).
    pub admitted: Option<Admitted>,
    /// Without a key under `KEYLESS=reads`: its sends are refused (-32016).
    pub sends_need_key: bool,
}

impl Access {
    /// `relay` with this access: its key's scope on each member, or sends refused without a
    /// key (`KEYLESS=reads`).
    pub fn on<'a, B: crate::relay::Backend>(
        &'a self,
        mut relay: crate::relay::Relay<'a, B>,
    ) -> crate::relay::Relay<'a, B> {
        if let Some(admitted) = &self.admitted {
            relay = relay.with_key_scope(&admitted.record.scope);
        }
        if self.sends_need_key {
            relay = relay.with_sends_needing_a_key();
        }
        relay
    }

    /// The key's hash, when there is one.
    pub fn hash(&self) -> Option<&KeyHash> {
        self.admitted.as_ref().map(|a| &a.hash)
    }

    /// The opt-in to the public mempool a send with this access carries, given the client's
    /// (`?public_after_blocks=N`): the key's choice ([`crate::access::keys::Publish`]), or the
    /// client's without a key.
    pub fn opt_in(&self, client: Option<u64>) -> Option<u64> {
        match &self.admitted {
            Some(admitted) => admitted.record.publish.opt_in(client),
            None => client,
        }
    }
}

/// Admits a request for the chain `chain_id` (0: not known yet) from `origin` and `ip` carrying
/// `key` ([`crate::access::keys::key::key_in`]). Keys off ([`keys_on`]): any key is ignored and
/// everyone is let in, as without keys. On: a key must be known and not revoked, and the request
/// in its scope's chains, origins and IPs; without one, `KEYLESS` says.
///
/// # Errors
/// The [`Refusal`] to answer with (HTTP 401, 403, 503).
pub async fn admit(
    env: &Env,
    config: &Config,
    key: crate::access::keys::key::KeyIn,
    chain_id: u64,
    origin: Option<&str>,
    ip: &str,
) -> Result<Access, Refusal> {
    use crate::access::keys::key::KeyIn;
    use crate::access::keys::Keyless;
    if !keys_on(env, config) {
        return Ok(Access::default());
    }
    match key {
        KeyIn::Malformed(why) => Err(Refusal::Malformed(why)),
        KeyIn::None => match config.keyless {
            Keyless::Open => Ok(Access::default()),
            Keyless::Reads => Ok(Access {
                admitted: None,
                sends_need_key: true,
            }),
            Keyless::Closed => Err(Refusal::NoKey),
        },
        KeyIn::Key(key) => {
            let admitted = identify(env, config, &key).await?;
            admitted
                .record
                .scope
                .check_request(chain_id, origin, ip)
                .map_err(Refusal::OutOfScope)?;
            Ok(Access {
                admitted: Some(admitted),
                sends_need_key: false,
            })
        }
    }
}
