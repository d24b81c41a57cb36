//! The Worker's fetch handler (wasm32 only): HTTP routing, limits, CORS and request ids around the
//! relay core, which runs on [`WorkerBackend`].
//!
//! Routes: `POST /` (JSON-RPC), `GET /` with `Upgrade: websocket` (JSON-RPC over a WebSocket,
//! [`websocket`]), `GET /health`, `GET /tx/{hash}` (what became of a transaction),
//! `GET /senders/{address}` (with `ADMIN_TOKEN`), `OPTIONS` (CORS preflight) on any of them: the
//! default chain's. Each chain served ([`Chains`]) has the same routes under `/evm/{chainId}` (or
//! its alias); a chain not served gets HTTP 404 with the list, and `GET /evm` the list. Every answer, errors included,
//! carries the CORS headers and the request's `X-Request-Id`. Any of these paths may follow an API
//! key's `/k/{key}`, taken out first; the RPC routes admit a request by its key
//! ([`crate::edge::keys`]); `/admin/keys` is the keys' admin API ([`crate::edge::admin_keys`]).

use crate::access::keys::key::{key_in, split_key_path};
use crate::access::keys::Refusal;
use crate::access::request_id::{self, request_id};
use crate::admin;
use crate::config::chains::Chains;
use crate::config::{Config, ConfigError};
use crate::edge::backend::{call_object, WorkerBackend};
use crate::edge::head_watch::KeepAlive;
use crate::edge::keys::Access;
use crate::edge::runtime::{chain_ids, chains_from_env};
use crate::edge::websocket;
use crate::jsonrpc::{self, RpcError};
use crate::ordering::private_terms;
use crate::relay::{status, wire, Backend, Relay};
use futures_util::StreamExt;
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use worker::{console_log, event, Context, Env, Headers, Method, Request, Response};

thread_local! {
    /// Every chain's settings, read by the isolate's first request: vars and secrets do not
    /// change during an isolate's life (the Durable Object reads them once too).
    static CHAINS: OnceCell<Rc<Result<Chains, ConfigError>>> = const { OnceCell::new() };
}

/// Every chain's settings, read once per isolate; their notices ([`Chains::notices`]) logged
/// then, each a `config_notice` line.
fn settings(env: &Env) -> Rc<Result<Chains, ConfigError>> {
    CHAINS.with(|cell| {
        cell.get_or_init(|| {
            let chains = chains_from_env(env);
            for notice in chains.iter().flat_map(|c| c.notices.iter()) {
                console_log!(
                    "{}",
                    crate::log::line("config_notice", &[("notice", notice.as_str().into())])
                );
            }
            Rc::new(chains)
        })
        .clone()
    })
}

/// The prefix of a served chain's paths: `/evm/{chainId}` or `/evm/{alias}`.
const CHAIN_PREFIX: &str = "/evm/";

fn json_response(status: u16, body: String) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    Ok(Response::ok(body)?
        .with_status(status)
        .with_headers(headers))
}

/// HTTP 400 with `{"error": why}`: a malformed path or query.
fn bad_request(why: &str) -> worker::Result<Response> {
    json_response(400, serde_json::json!({ "error": why }).to_string())
}

/// HTTP 429 with `Retry-After`: a client over its read rate limit.
fn rate_limited(config: &Config) -> worker::Result<Response> {
    let response = json_response(429, r#"{"error":"rate limit exceeded"}"#.into())?;
    response
        .headers()
        .set("retry-after", &config.rate_limit_period_s.to_string())?;
    Ok(response)
}

/// The client's IP as Cloudflare's edge gives it (`CF-Connecting-IP`); locally, where no edge
/// sets it, every client shares one key.
fn client_ip(req: &Request) -> String {
    req.headers()
        .get("cf-connecting-ip")
        .ok()
        .flatten()
        .unwrap_or_else(|| "unknown".into())
}

/// `GET /senders/{address}` with `Authorization: Bearer <ADMIN_TOKEN>`: the sender's object's
/// state. 404 when no `ADMIN_TOKEN` is set (the route does not exist), 429 over the client's read
/// rate limit (each request counts, so token guesses cost the guesser), 401 for a missing or
/// wrong token, 400 for a path that is not an address.
async fn sender_view(
    req: &Request,
    env: &Env,
    config: &Config,
    id: &str,
    path: &str,
) -> worker::Result<Response> {
    let Some(token) = config.admin_token.as_deref() else {
        return Response::error("not found", 404);
    };
    let backend = WorkerBackend::new(config, env, id, client_ip(req));
    if backend.over_rate_limit(0, 1).await {
        return rate_limited(config);
    }
    let authorization = req.headers().get("authorization")?;
    if !admin::bearer_matches(authorization.as_deref(), token) {
        let response = json_response(
            401,
            r#"{"error":"a valid bearer token is required"}"#.into(),
        )?;
        response.headers().set("www-authenticate", "Bearer")?;
        return Ok(response);
    }
    let sender = match admin::sender_of_path(path) {
        Some(Ok(sender)) => sender,
        Some(Err(why)) => return bad_request(&why),
        None => return Response::error("not found", 404),
    };
    let state = call_object(
        env,
        config,
        &sender,
        Method::Get,
        wire::STATE_PATH,
        None,
        Headers::new(),
    )
    .await;
    match state {
        Ok(state) => json_response(200, state),
        Err(why) => json_response(
            503,
            serde_json::json!({
                "error": format!("the sender's Durable Object can't be reached: {}", config.redact(why.why()))
            })
            .to_string(),
        ),
    }
}

/// `GET /tx/{hash}[?sender=0x…]`: what became of one transaction (see [`status`]); counted as a
/// read against the client's rate limit.
async fn tx_status(
    req: &Request,
    env: &Env,
    config: &Config,
    id: &str,
    path: &str,
    access: &Access,
) -> worker::Result<Response> {
    let hash = match status::hash_of_path(path) {
        Some(Ok(hash)) => hash,
        Some(Err(why)) => return bad_request(&why),
        None => return Response::error("not found", 404),
    };
    let url = req.url()?;
    let sender = match status::sender_of_query(url.query()) {
        Some(Ok(sender)) => Some(sender),
        Some(Err(why)) => return bad_request(&why),
        None => None,
    };
    let backend =
        WorkerBackend::new(config, env, id, client_ip(req)).with_key(access.admitted.as_ref());
    if backend.over_rate_limit(0, 1).await {
        return rate_limited(config);
    }
    if let Some(refusal) = backend.over_key_budget(0, 1).await {
        return key_refused(&refusal);
    }
    let chain_ids = chain_ids();
    let (code, body) = Relay::new(config, &backend, &chain_ids)
        .tx_status(&hash, sender)
        .await;
    json_response(code, body)
}

/// The request's body, at most `limit` bytes (`None` beyond): in one call when its length is
/// declared (`declared`, already checked against the limit), otherwise chunk by chunk as the
/// client sends it, counting, and given up as soon as the count passes `limit`. A chunked body is
/// never buffered beyond the limit and one chunk, and one that never ends gets its HTTP 413 all
/// the same.
async fn body_within(
    req: &mut Request,
    declared: Option<usize>,
    limit: usize,
) -> worker::Result<Option<Vec<u8>>> {
    if declared.is_some() || req.inner().body().is_none() {
        let body = req.bytes().await?;
        return Ok((body.len() <= limit).then_some(body));
    }
    let mut stream = req.stream()?;
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

async fn handle_rpc(
    mut req: Request,
    env: &Env,
    config: &Config,
    id: &str,
    opened: &RefCell<Option<KeepAlive>>,
    access: &Access,
) -> worker::Result<Response> {
    let too_large = || {
        let error = RpcError::new(
            jsonrpc::LIMIT_EXCEEDED,
            format!("request body exceeds {} bytes", config.max_request_bytes),
        );
        json_response(413, error.response(&jsonrpc::Id::null()))
    };
    let declared = req
        .headers()
        .get("content-length")?
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len > config.max_request_bytes) {
        return too_large();
    }
    let Some(body) = body_within(&mut req, declared, config.max_request_bytes).await? else {
        return too_large();
    };
    let url = req.url()?;
    // The client's opt-in to the public mempool for its private sends: a bad one is refused
    // before anything is read or sent.
    let opt_in = match private_terms::opt_in_of_query(url.query()) {
        Ok(blocks) => blocks,
        Err(bad) => {
            let error = RpcError::new(jsonrpc::INVALID_REQUEST, bad.to_string());
            return json_response(400, error.response(&jsonrpc::Id::null()));
        }
    };
    let mut backend =
        WorkerBackend::new(config, env, id, client_ip(&req)).with_key(access.admitted.as_ref());
    backend.cache_origin = Some(url.origin().ascii_serialization());
    #[cfg(feature = "test-faults")]
    {
        backend.test_fault = req.headers().get(crate::edge::backend::TEST_FAULT_HEADER)?;
    }
    let chain_ids = chain_ids();
    // `Cache-Control: no-cache` (or `no-store`): the read cache is passed by.
    let bypass = req.headers().get("cache-control")?.is_some_and(|v| {
        v.split(',').any(|d| {
            matches!(
                d.trim().to_ascii_lowercase().as_str(),
                "no-cache" | "no-store"
            )
        })
    });
    // A key's choice for its private sends wins over the URL's (docs/keys.md).
    let relay = Relay::new(config, &backend, &chain_ids)
        .with_opt_in(access.opt_in(opt_in))
        .with_cache_bypass(bypass);
    let reply = access.on(relay).handle(&body).await;
    let response = match reply.body {
        Some(body) => json_response(reply.status, body.render())?,
        None => Response::empty()?.with_status(reply.status),
    };
    if let Some(seconds) = reply.retry_after_s {
        response
            .headers()
            .set("retry-after", &seconds.to_string())?;
    }
    if let Some(public_after) = &reply.public_after {
        response
            .headers()
            .set(private_terms::PUBLIC_AFTER_HEADER, public_after)?;
    }
    if let Some(cache) = reply.cache {
        response.headers().set("x-cache", cache)?;
        // Reads went through the cache: its chain's head is followed while they come.
        if let Some(watch) = crate::edge::head_watch::open_if_wanted(config) {
            opened.replace(Some(watch));
        }
    }
    Ok(response)
}

/// `GET /` with `Upgrade: websocket`: JSON-RPC over a WebSocket ([`websocket`]). The upgrade
/// counts as one read against the client's rate limit (HTTP 429 over it); a page whose `Origin`
/// `CORS_ORIGINS` does not allow gets HTTP 403; a bad `?public_after_blocks=` HTTP 400. Behind a
/// private route the upgrade's answer says whether the socket's sends may go public
/// (`x-public-after-blocks`).
async fn websocket_upgrade(
    req: &Request,
    env: &Env,
    config: &Config,
    id: &str,
    access: Access,
) -> worker::Result<Response> {
    if let Some(origin) = req.headers().get("origin")? {
        if !config.cors_origins.allows(&origin) {
            return json_response(
                403,
                serde_json::json!({ "error": format!("origin {origin} is not allowed") })
                    .to_string(),
            );
        }
    }
    let backend =
        WorkerBackend::new(config, env, id, client_ip(req)).with_key(access.admitted.as_ref());
    if backend.over_rate_limit(0, 1).await {
        return rate_limited(config);
    }
    if let Some(refusal) = backend.over_key_budget(0, 1).await {
        return key_refused(&refusal);
    }
    // The opt-in of the URL it connected to (or its key's choice) holds for every private send
    // on the socket.
    let opt_in = match private_terms::opt_in_of_query(req.url()?.query()) {
        Ok(blocks) => access.opt_in(blocks),
        Err(bad) => return bad_request(&bad.to_string()),
    };
    let response = websocket::upgrade(
        env.clone(),
        Rc::new(config.clone()),
        chain_ids(),
        id.to_string(),
        client_ip(req),
        opt_in,
        access,
    )?;
    if config.private_route() {
        let granted = private_terms::granted(opt_in, config.send_public_after_blocks);
        response.headers().set(
            private_terms::PUBLIC_AFTER_HEADER,
            &private_terms::header_value(granted),
        )?;
    }
    Ok(response)
}

/// Bench-only route: decodes `raw` `iterations` times. Timed from outside against
/// `iterations: 0` (a Worker's clocks do not advance while it computes).
#[cfg(feature = "bench")]
async fn bench_decode(mut req: Request) -> worker::Result<Response> {
    #[derive(serde::Deserialize)]
    struct Job {
        raw: String,
        iterations: u32,
    }
    let job: Job = req.json().await?;
    let raw = crate::hex::decode(&job.raw).map_err(|e| worker::Error::RustError(e.to_string()))?;
    let mut ok = 0u32;
    for _ in 0..job.iterations {
        ok += u32::from(crate::transaction::decode(std::hint::black_box(&raw)).is_ok());
    }
    json_response(
        200,
        serde_json::json!({ "iterations": job.iterations, "ok": ok }).to_string(),
    )
}

/// The JSON answer to a request for a chain not served (`/evm/{segment}`): HTTP 404, JSON-RPC
/// -32001 (EIP-1474 "resource not found") naming it (its first 66 characters), `data.chains` the
/// chains served ([`Chains::listing`]).
fn chain_not_served(chains: &Chains, segment: &str) -> worker::Result<Response> {
    // The client's own text, said back at most 66 characters long.
    let segment: String = segment.chars().take(66).collect();
    let served: Vec<String> = chains.served.iter().map(|c| c.id.to_string()).collect();
    let message = if served.is_empty() {
        format!("chain {segment:?} is not served here: this relay serves one chain, at /")
    } else {
        format!(
            "chain {segment:?} is not served here; served: {}",
            served.join(", ")
        )
    };
    let error = RpcError {
        data: Some(serde_json::json!({ "chains": chains.listing() })),
        ..RpcError::new(jsonrpc::RESOURCE_NOT_FOUND, message)
    };
    json_response(404, error.response(&jsonrpc::Id::null()))
}

/// The answer to a request for a chain whose settings can't be read: HTTP 500 with the error
/// (naming the chain and the setting), logged as `config_error`.
fn misconfigured(e: &ConfigError, id: &str) -> worker::Result<Response> {
    console_log!(
        "{}",
        crate::log::line(
            "config_error",
            &[
                ("error", e.to_string().into()),
                ("chain", e.chain.into()),
                ("request_id", id.into())
            ]
        )
    );
    let error = RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string());
    json_response(500, error.response(&jsonrpc::Id::null()))
}

/// Admits a request on an RPC route (`POST /`, `GET /`, `GET /tx/…`, within its chain's `path`)
/// by its key ([`crate::edge::keys::admit`]): from the path's `/k/{key}` (`path_key`), else its
/// `Authorization` (`Basic` with the key as the password, or `Bearer`). Any other route: no key.
async fn admit_request(
    req: &Request,
    env: &Env,
    config: &Config,
    path: &str,
    path_key: Option<&str>,
) -> worker::Result<Result<Access, Refusal>> {
    let rpc_route = matches!(
        (req.method(), path),
        (Method::Post, "/") | (Method::Get, "/")
    ) || path.starts_with(status::TX_PREFIX);
    if !rpc_route {
        return Ok(Ok(Access::default()));
    }
    let authorization = req.headers().get("authorization")?;
    let key = key_in(path_key, authorization.as_deref());
    let chain_id = config.chain_id.or_else(|| chain_ids().known()).unwrap_or(0);
    let origin = req.headers().get("origin")?;
    Ok(crate::edge::keys::admit(
        env,
        config,
        key,
        chain_id,
        origin.as_deref(),
        &client_ip(req),
    )
    .await)
}

/// The answer to a request refused for its key: the refusal's HTTP status and JSON-RPC error
/// (null id), `Retry-After` over budget.
fn key_refused(refusal: &Refusal) -> worker::Result<Response> {
    let response = json_response(
        refusal.status(),
        refusal.error().response(&jsonrpc::Id::null()),
    )?;
    if let Some(seconds) = refusal.retry_after_s() {
        response
            .headers()
            .set("retry-after", &seconds.to_string())?;
    }
    Ok(response)
}

/// `opened`: where a head watch the request opens is left for the fetch handler to keep alive
/// ([`crate::edge::head_watch`]).
async fn route(
    req: Request,
    env: &Env,
    settings: &Result<Chains, ConfigError>,
    id: &str,
    opened: &RefCell<Option<KeepAlive>>,
) -> worker::Result<Response> {
    if req.method() == Method::Options {
        return Ok(Response::empty()?.with_status(204));
    }
    let chains = match settings {
        Ok(chains) => chains,
        Err(e) => return misconfigured(e, id),
    };
    // `/k/{key}/…`: the key is taken out of the path before anything else sees it.
    let whole = req.path();
    let (path_key, full) = match split_key_path(&whole) {
        Some((key, rest)) => (Some(key.to_string()), rest),
        None => (None, whole.clone()),
    };
    if path_key.is_none() && full.starts_with(crate::edge::admin_keys::PREFIX) {
        return crate::edge::admin_keys::route(req, env, chains, id).await;
    }
    // `GET /evm`: the chains served, for a client (or an operator) to find its chain's path.
    if req.method() == Method::Get && (full == "/evm" || full == CHAIN_PREFIX) {
        return json_response(
            200,
            serde_json::json!({ "chains": chains.listing() }).to_string(),
        );
    }
    // `/evm/{chain}` and what follows it, or today's paths for the default chain.
    let (config, path) = match full.strip_prefix(CHAIN_PREFIX) {
        Some(rest) => {
            let (segment, within) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let Some(served) = chains.find(segment) else {
                return chain_not_served(chains, segment);
            };
            let within = if within.is_empty() { "/" } else { within };
            (&served.config, within.to_string())
        }
        None => (&chains.default, full),
    };
    let config = match config {
        Ok(config) => config.as_ref(),
        Err(e) => return misconfigured(e, id),
    };
    let upgrade = req.headers().get("upgrade")?;
    let websocket = upgrade.is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let access = match admit_request(&req, env, config, &path, path_key.as_deref()).await? {
        Ok(access) => access,
        Err(refusal) => return key_refused(&refusal),
    };
    match (req.method(), path.as_str()) {
        (Method::Post, "/") => handle_rpc(req, env, config, id, opened, &access).await,
        (Method::Get, "/") if websocket => websocket_upgrade(&req, env, config, id, access).await,
        (Method::Get, "/health") => json_response(200, r#"{"status":"ok"}"#.into()),
        (Method::Get, path) if path.starts_with(admin::SENDERS_PREFIX) => {
            sender_view(&req, env, config, id, path).await
        }
        (Method::Get, path) if path.starts_with(status::TX_PREFIX) => {
            tx_status(&req, env, config, id, path, &access).await
        }
        #[cfg(feature = "bench")]
        (Method::Post, "/__bench/decode") => bench_decode(req).await,
        (_, "/") => {
            let error = RpcError::new(
                jsonrpc::INVALID_REQUEST,
                "JSON-RPC requests are POSTed to / (or /evm/{chainId})",
            );
            let response = json_response(405, error.response(&jsonrpc::Id::null()))?;
            response.headers().set("allow", "POST, OPTIONS")?;
            Ok(response)
        }
        _ => Response::error("not found", 404),
    }
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let settings = settings(&env);
    let id = request_id(req.headers().get(request_id::HEADER)?.as_deref());
    let origin = req.headers().get("origin")?;
    let preflight = req.method() == Method::Options;
    // CORS is the deployment's: any chain's settings that could be read carry it.
    let cors = match settings.as_ref() {
        Ok(chains) => std::iter::once(&chains.default)
            .chain(chains.served.iter().map(|c| &c.config))
            .find_map(|c| c.as_ref().ok())
            .map_or(crate::access::cors::CorsOrigins::Any, |c| {
                c.cors_origins.clone()
            }),
        Err(_) => crate::access::cors::CorsOrigins::Any,
    };
    let opened = RefCell::new(None);
    let response = route(req, &env, &settings, &id, &opened).await?;
    // A probe or chain check this request started outlives its response only through waitUntil.
    if crate::edge::race::background_running() {
        ctx.wait_until(crate::edge::race::background_done());
    }
    // A head watch this request opened lives on its I/O.
    if let Some(watch) = opened.into_inner() {
        ctx.wait_until(watch.closed());
    }
    if response.status_code() == 101 {
        return Ok(response); // a WebSocket: CORS does not apply, its headers are the runtime's
    }
    let headers = response.headers();
    let cors_headers = if preflight {
        cors.preflight(origin.as_deref())
    } else {
        cors.headers(origin.as_deref())
    };
    for (name, value) in cors_headers {
        headers.set(name, &value)?;
    }
    headers.set(request_id::HEADER, &id)?;
    Ok(response)
}
