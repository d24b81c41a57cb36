//! The admin API of API keys (wasm32 only), behind `ADMIN_TOKEN`'s bearer (unset: no such
//! routes, HTTP 404): `POST /admin/keys` makes a key (its text is in that answer only),
//! `GET /admin/keys` lists them, `GET /admin/keys/{id}` shows one with its budgets and usage,
//! `PATCH /admin/keys/{id}` changes its label, scope or quota, `DELETE /admin/keys/{id}` revokes
//! it. A body is a [`KeyChange`]. Each change is written to KV and to the key's object, which is
//! the authority: isolates learn it with their next lease (at most
//! [`crate::access::keys::budget::LEASE_MS`]). Keys off (no `KEYS` binding or no `RELAY_SECRET`):
//! HTTP 503 saying so. Each request counts as a read against the client's rate limit.

use crate::access::keys::key::{kv_prefix_of_id, ApiKey, KeyHash, HASH_VERSION};
use crate::access::keys::{KeyChange, KeyRecord};
use crate::admin;
use crate::config::chains::Chains;
use crate::config::Config;
use crate::edge::backend::WorkerBackend;
use crate::edge::key_authority::{RECORD_PATH, STATE_PATH};
use crate::edge::keys::{call_authority, keys_on, KEYS_BINDING};
use crate::edge::runtime::now_ms;
use crate::relay::Backend;
use serde_json::json;
use worker::{Env, Headers, Method, Request, Response};

/// The admin API's path.
pub const PREFIX: &str = "/admin/keys";

/// The most keys `GET /admin/keys` lists (KV lists 1,000 names a call).
const LIST_MAX: u64 = 1_000;

fn answer(status: u16, body: serde_json::Value) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::ok(body.to_string())?
        .with_status(status)
        .with_headers(headers))
}

fn error(status: u16, why: &str) -> worker::Result<Response> {
    answer(status, json!({ "error": why }))
}

/// Routes an admin request (`path` under [`PREFIX`]) with the deployment's settings (the default
/// chain's: `ADMIN_TOKEN`, `RELAY_SECRET`).
pub async fn route(
    mut req: Request,
    env: &Env,
    chains: &Chains,
    id: &str,
) -> worker::Result<Response> {
    let Ok(config) = chains.default.as_ref() else {
        return error(500, "the deployment's settings cannot be read");
    };
    let config: &Config = config;
    let Some(token) = config.admin_token.as_deref() else {
        return Response::error("not found", 404);
    };
    let ip = req
        .headers()
        .get("cf-connecting-ip")?
        .unwrap_or_else(|| "unknown".into());
    if WorkerBackend::new(config, env, id, ip)
        .over_rate_limit(0, 1)
        .await
    {
        return error(429, "rate limit exceeded");
    }
    let authorization = req.headers().get("authorization")?;
    if !admin::bearer_matches(authorization.as_deref(), token) {
        let response = error(401, "a valid bearer token is required")?;
        response.headers().set("www-authenticate", "Bearer")?;
        return Ok(response);
    }
    if !keys_on(env, config) {
        return error(
            503,
            "API keys are off: bind a Workers KV namespace as KEYS and set RELAY_SECRET (docs/keys.md)",
        );
    }
    let path = req.path();
    let key_id = path
        .strip_prefix(PREFIX)
        .map(|rest| rest.trim_start_matches('/').to_string())
        .unwrap_or_default();
    let body = match req.method() {
        Method::Post | Method::Patch => req.bytes().await?,
        _ => Vec::new(),
    };
    match (req.method(), key_id.is_empty()) {
        (Method::Post, true) => create(env, config, &body).await,
        (Method::Get, true) => list(env).await,
        (method, false) => one(env, method, &key_id, &body).await,
        _ => error(
            405,
            "GET or POST /admin/keys; GET, PATCH or DELETE /admin/keys/{id}",
        ),
    }
}

/// A change ([`KeyChange::parse`]) whose tier, when it names one, has a rate limit binding in
/// this deployment (`RATE_LIMIT_SEND_{TIER}` or `RATE_LIMIT_READ_{TIER}`): a tier's limits are
/// its bindings, fixed at deploy.
fn parse(env: &Env, body: &[u8]) -> Result<KeyChange, String> {
    use crate::access::rate_limit::{binding_name, Bucket};
    let change = KeyChange::parse(body)?;
    if let Some(tier) = change.tier.as_deref().filter(|t| !t.is_empty()) {
        let names = [Bucket::Send, Bucket::Read].map(|b| binding_name(b, Some(tier)));
        if !names
            .iter()
            .any(|name| crate::edge::backend::rate_limiter(env, name).is_some())
        {
            return Err(format!(
                "tier {tier}: this deployment has no binding {} or {} (wrangler.toml [[ratelimits]])",
                names[0], names[1]
            ));
        }
    }
    Ok(change)
}

/// `POST /admin/keys`: a new key under the body's label, scope and quota; HTTP 201 with its text
/// (shown once: only its hash is kept), its id and record.
async fn create(env: &Env, config: &Config, body: &[u8]) -> worker::Result<Response> {
    let change = match parse(env, if body.is_empty() { b"{}" } else { body }) {
        Ok(change) => change,
        Err(why) => return error(400, &why),
    };
    let Some(secret) = config.relay_secret.as_ref() else {
        return error(503, "RELAY_SECRET is not set");
    };
    let key = ApiKey::from_random(*uuid::Uuid::new_v4().as_bytes());
    let hash = key.hash(secret.bytes());
    let record = KeyChange {
        revoked: None,
        ..change
    }
    .apply(KeyRecord {
        id: hash.id(),
        created_ms: now_ms(),
        ..KeyRecord::default()
    });
    if let Err(why) = write(env, &hash, &record).await {
        return error(503, &why);
    }
    answer(
        201,
        json!({ "key": key.reveal(), "id": record.id, "record": record }),
    )
}

/// `GET /admin/keys`: every key's record (at most [`LIST_MAX`]).
async fn list(env: &Env) -> worker::Result<Response> {
    let kv = env.kv(KEYS_BINDING)?;
    let names = kv
        .list()
        .prefix(format!("key/v{HASH_VERSION}/"))
        .limit(LIST_MAX)
        .execute()
        .await
        .map_err(|e| worker::Error::RustError(e.to_string()))?;
    let mut records = Vec::new();
    for name in names.keys {
        if let Ok(Some(record)) = kv.get(&name.name).json::<KeyRecord>().await {
            records.push(record);
        }
    }
    answer(200, json!({ "keys": records }))
}

/// `GET`, `PATCH` or `DELETE /admin/keys/{id}`.
async fn one(env: &Env, method: Method, id: &str, body: &[u8]) -> worker::Result<Response> {
    let Some((hash, record)) = find(env, id).await? else {
        return error(404, "no such key");
    };
    let change = match method {
        Method::Get => {
            let state = call_authority(env, &hash, Method::Get, STATE_PATH, None).await;
            let state: serde_json::Value = state
                .and_then(|s| serde_json::from_str(&s).ok())
                .unwrap_or_default();
            return answer(
                200,
                json!({ "record": record, "budget": state["budget"], "usage": state["usage"] }),
            );
        }
        Method::Patch => match parse(env, body) {
            Ok(change) => change,
            Err(why) => return error(400, &why),
        },
        Method::Delete => KeyChange {
            revoked: Some(true),
            ..KeyChange::default()
        },
        _ => return error(405, "GET, PATCH or DELETE /admin/keys/{id}"),
    };
    let record = change.apply(record);
    if let Err(why) = write(env, &hash, &record).await {
        return error(503, &why);
    }
    answer(200, json!({ "record": record }))
}

/// The key whose id is `id` (`k_` and 16 hex digits): its hash and KV record.
async fn find(env: &Env, id: &str) -> worker::Result<Option<(KeyHash, KeyRecord)>> {
    let Some(prefix) = kv_prefix_of_id(id) else {
        return Ok(None);
    };
    let kv = env.kv(KEYS_BINDING)?;
    let names = kv
        .list()
        .prefix(prefix)
        .limit(2)
        .execute()
        .await
        .map_err(|e| worker::Error::RustError(e.to_string()))?;
    let Some(name) = names.keys.first() else {
        return Ok(None);
    };
    let Some(hash) = name.name.rsplit('/').next().and_then(KeyHash::parse) else {
        return Ok(None);
    };
    let record = kv.get(&name.name).json::<KeyRecord>().await.ok().flatten();
    Ok(record.map(|r| (hash, r)))
}

/// Writes `record` as the key `hash`'s: its object first (the authority: a revocation holds
/// from there at once), then KV.
async fn write(env: &Env, hash: &KeyHash, record: &KeyRecord) -> Result<(), String> {
    let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
    call_authority(env, hash, Method::Put, RECORD_PATH, Some(text.clone()))
        .await
        .ok_or("the key's Durable Object cannot be reached; nothing changed")?;
    let kv = env.kv(KEYS_BINDING).map_err(|e| e.to_string())?;
    kv.put(&hash.kv_name(), text)
        .map_err(|e| e.to_string())?
        .execute()
        .await
        .map_err(|_| "KV cannot be written; the key's object has the change".to_string())
}
