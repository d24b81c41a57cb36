//! A client's read through the read cache ([`crate::cache`]), when `CACHE` is on: answered from
//! what is kept when it still holds, else asked of the upstream once for every identical read in
//! flight, and kept when the chain says it may be. The cache's head is asked here, one ask at a
//! time per chain (`eth_getBlockByNumber("latest", false)`, then each parent by hash until it
//! links to the blocks known, then the `finalized` block at most every
//! [`crate::cache::FINALIZED_FRESH_MS`]); its own answer serves the same read by clients.

use super::{Backend, Relay};
use crate::cache::finality::Finalized;
use crate::cache::policy::{key_of, About, Header, PinnedAnswer};
use crate::cache::{Begin, CacheSettings, ReadCache, Tag};
use crate::jsonrpc::{Answer, Request, Response};
use crate::metrics::Metric;
use crate::upstream::heads::BlockNeed;
use crate::upstream::{error_metric, CallKind, UpstreamError, UpstreamReply};
use serde_json::{json, Value};
use std::cell::RefCell;

/// How often a read waiting for an identical one in flight (or for the head ask) looks, ms.
const FOLLOW_POLL_MS: u64 = 2;

/// How long the head ask may take before a waiting read gives up on it, and another may ask, ms.
const HEAD_ASK_GIVE_UP_MS: u64 = 5_000;

/// What the cache did for a body's reads, for its `X-Cache` header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSeen {
    /// Reads answered from the cache.
    pub hits: u32,
    /// Reads the cache could have answered and did not (asked upstream, or passed by).
    pub misses: u32,
}

impl CacheSeen {
    /// The `X-Cache` header: `HIT` when every read the cache could answer was answered from it,
    /// `MISS` when one was not; `None` when the body had none.
    pub fn header(&self) -> Option<&'static str> {
        match (self.hits, self.misses) {
            (0, 0) => None,
            (_, 0) => Some("HIT"),
            _ => Some("MISS"),
        }
    }
}

/// Clears a read's flight when its leader goes without landing an answer (the request was
/// cancelled): its followers then ask for themselves.
struct Flying<'c> {
    cache: &'c RefCell<ReadCache>,
    chain: u64,
    key: &'c str,
    /// When the flight began, ms: a dropped flight's `None` is kept for its followers from then.
    since_ms: u64,
    landed: bool,
}

impl Drop for Flying<'_> {
    fn drop(&mut self) {
        if !self.landed {
            if let Ok(mut cache) = self.cache.try_borrow_mut() {
                cache.land(self.chain, self.key, None, self.since_ms);
            }
        }
    }
}

/// Ends a chain's head ask however it ends.
struct Asking<'c> {
    cache: &'c RefCell<ReadCache>,
    chain: u64,
    /// When it was claimed, ms.
    since_ms: u64,
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if let Ok(mut cache) = self.cache.try_borrow_mut() {
            cache.release_refresh(self.chain, self.since_ms);
        }
    }
}

impl<B: Backend> Relay<'_, B> {
    /// Answers `req`, a read, through `cache` ([`crate::cache`]): a read the cache knows how to
    /// keep is answered from it while what it keeps holds (asking the head first when the answer
    /// depends on it and the head is older than `CACHE_HEAD_MS`); else it is asked of the
    /// upstream as [`Relay::proxy`] asks it, once for identical reads in flight, and its
    /// `result` kept when the chain lets it be. With `Cache-Control: no-cache` nothing kept is
    /// used (the answer is still kept).
    pub(super) async fn cached_read(&self, req: &Request, cache: &RefCell<ReadCache>) -> Response {
        let about = About::of(&req.method, &req.params);
        if about == About::Never {
            return self.proxy(req).await;
        }
        let chain = self.config.cache_chain();
        let settings = self.config.cache_settings;
        let key = key_of(&req.method, &req.params);
        let id = req.response_id();
        if !self.bypass_cache {
            let now = self.backend.now_ms();
            let stale_final =
                matches!(about, About::Number(_)) && cache.borrow().needs_finalized(chain, now);
            if stale_final || cache.borrow().needs_head(chain, about, now, &settings) {
                self.ask_head(cache, chain, &settings).await;
            }
            let now = self.backend.now_ms();
            let found = cache
                .borrow_mut()
                .lookup(chain, &key, about, now, &settings);
            self.emit_stats(cache, now);
            if let Some(result) = found {
                self.seen(true);
                return Response::new(&id, Answer::Result(result.to_string()));
            }
            // The data centre's cache, for an answer that may hold for good.
            if let Some(shared) = self.shared_key(cache, chain, about, &key) {
                if let Some(result) = self.backend.shared_get(&shared).await {
                    cache.borrow_mut().keep_final(chain, &key, &result);
                    self.seen(true);
                    return Response::new(&id, Answer::Result(result));
                }
            }
        }
        self.seen(false);
        let give_up_ms = self.config.upstream_timeout_ms.saturating_add(1_000);
        let started = self.backend.now_ms();
        if cache.borrow_mut().begin(chain, &key, started, give_up_ms) == Begin::Follow {
            loop {
                self.backend.sleep(FOLLOW_POLL_MS).await;
                let landed = cache.borrow_mut().take_landed(chain, &key);
                match landed {
                    Some(Some(answer)) => return Response::new(&id, answer),
                    Some(None) => break,
                    None if self.backend.now_ms() > started.saturating_add(give_up_ms) => {
                        cache.borrow_mut().leave_flight(chain, &key);
                        break;
                    }
                    None => {}
                }
            }
            // The leader failed or gave up: this read asks for itself, keeping nothing.
            return self.proxy(req).await;
        }
        let mut flying = Flying {
            cache,
            chain,
            key: &key,
            since_ms: started,
            landed: false,
        };
        // The head before the ask: an answer is kept only if the head is still the same after.
        let head_before = head_hash(cache, chain);
        // About an unfinalized block by number, an answer that names no block is asked of that
        // block by its hash (EIP-1898): an upstream still on another fork cannot answer for it.
        let now = self.backend.now_ms();
        let pinned = match about {
            About::Number(n) => cache
                .borrow()
                .pin(chain, &req.method, &req.params, n, now, settings.head_ms)
                .map(|params| Request {
                    id: req.id.clone(),
                    method: req.method.clone(),
                    params,
                }),
            _ => None,
        };
        // Routed by the block the client named: an upstream behind it is skipped either way.
        let kind = CallKind::of_method(&req.method);
        let need = BlockNeed::of(&req.method, &req.params);
        let timeout_ms = self.config.upstream_timeout_ms;
        let asked = pinned.as_ref().unwrap_or(req);
        let mut reply = self
            .backend
            .post_read(&asked.to_json(), kind, need, timeout_ms)
            .await;
        let parse = |reply: &Result<UpstreamReply, UpstreamError>| match reply {
            Ok(reply) => Answer::parse(&reply.body),
            Err(_) => None,
        };
        let mut answer = parse(&reply);
        let mut keep = true;
        if pinned.is_some() {
            // No answer at all: given as it is, not asked again.
            let said = answer.as_ref().map(PinnedAnswer::of);
            match said {
                Some(PinnedAnswer::Answered) => cache.borrow_mut().pin_answered(chain, true),
                Some(PinnedAnswer::Unsupported) => cache.borrow_mut().pin_answered(chain, false),
                _ => {}
            }
            if matches!(
                said,
                Some(PinnedAnswer::Unsupported | PinnedAnswer::Unknown)
            ) {
                // Not that block's upstream, or not a form it reads: asked as the client asked;
                // its answer goes to the followers too, and is not kept.
                keep = false;
                reply = self
                    .backend
                    .post_read(&req.to_json(), kind, need, timeout_ms)
                    .await;
                answer = parse(&reply);
            }
        }
        let mut final_result = None;
        if let Some(Answer::Result(result)) = answer.as_ref().filter(|_| keep) {
            let stable = head_before == head_hash(cache, chain) || about == About::BlockHash;
            if stable {
                let now = self.backend.now_ms();
                let stored = cache
                    .borrow_mut()
                    .store(chain, &key, about, result, now, &settings);
                if stored.tag == Some(Tag::Final) {
                    final_result = Some(result.clone());
                }
            }
        }
        let now = self.backend.now_ms();
        cache.borrow_mut().land(chain, &key, answer, now);
        flying.landed = true;
        // Its followers have it: the data centre's cache is written after.
        if let Some(result) = final_result {
            if let Some(shared) = self.shared_key(cache, chain, about, &key) {
                self.backend.shared_put(&shared, &result).await;
            }
        }
        match reply {
            Ok(reply) => self.proxied_response(req, reply.body),
            Err(e) => {
                self.backend.emit(&error_metric(&req.method, &e));
                Response::error(&id, &e.to_rpc())
            }
        }
    }

    /// The shared cache's key of a read on `chain` (`key`, [`key_of`]) about `about`, when its
    /// answer may hold for good ([`ReadCache::may_be_final`]) and the chain's genesis hash is
    /// known ([`shared_key`]).
    fn shared_key(
        &self,
        cache: &RefCell<ReadCache>,
        chain: u64,
        about: About,
        key: &str,
    ) -> Option<String> {
        let cache = cache.borrow();
        if !cache.may_be_final(chain, about) {
            return None;
        }
        Some(shared_key(chain, cache.genesis(chain)?, key))
    }

    /// After this body's sends: the cache asks its head again at the next read that depends on
    /// it ([`ReadCache::suspect`]), so that a client reading right after its send (its balance,
    /// its nonce at `latest`) does not get the head from before it.
    pub(super) fn after_sends(&self) {
        if let Some(cache) = self.backend.read_cache().filter(|_| self.config.cache) {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache.suspect(self.config.cache_chain(), self.backend.now_ms());
            }
        }
    }

    /// Counts a read the cache could answer: answered from it (`hit`) or not.
    fn seen(&self, hit: bool) {
        let mut seen = self.cache_seen.get();
        if hit {
            seen.hits += 1;
        } else {
            seen.misses += 1;
        }
        self.cache_seen.set(seen);
    }

    /// Writes the isolate's cache counters as one `cache` metric when they are due
    /// ([`ReadCache::take_stats`]).
    fn emit_stats(&self, cache: &RefCell<ReadCache>, now_ms: u64) {
        let Some(stats) = cache.borrow_mut().take_stats(now_ms) else {
            return;
        };
        let (held_bytes, entries) = cache.borrow().held();
        let evicted = cache.borrow().evicted();
        self.backend.emit(
            &Metric::new("cache", "", "reads")
                .value("hits", stats.hits as f64)
                .value("misses", stats.misses as f64)
                .value("hit_bytes", stats.hit_bytes as f64)
                .field("coalesced", stats.coalesced)
                .field("stored", stats.stored)
                .field("stored_bytes", stats.stored_bytes)
                .field("held_bytes", held_bytes)
                .field("entries", entries)
                .field("evicted", evicted)
                .field("reorgs", stats.reorgs)
                .field("dropped", stats.dropped)
                .field("heads_heard", stats.heads_heard),
        );
    }

    /// Asks `chain`'s head for the cache (one ask at a time: a read that finds one under way
    /// waits for it, at most [`HEAD_ASK_GIVE_UP_MS`]): the latest block, its parents by hash
    /// until it links to the blocks known ([`ReadCache::missing_parent`]), and the finalized
    /// block when due (the `finalized` tag; an upstream without it: the head less
    /// `CACHE_FINALITY_DEPTH`). A reorg is a `cache_reorg` line. An ask that fails leaves the
    /// head as it was (and older than `CACHE_HEAD_MS`: nothing at the head is served).
    async fn ask_head(&self, cache: &RefCell<ReadCache>, chain: u64, settings: &CacheSettings) {
        let started = self.backend.now_ms();
        if !cache
            .borrow_mut()
            .claim_refresh(chain, started, HEAD_ASK_GIVE_UP_MS)
        {
            while cache.borrow().refreshing(chain)
                && self.backend.now_ms() < started.saturating_add(HEAD_ASK_GIVE_UP_MS)
            {
                self.backend.sleep(FOLLOW_POLL_MS).await;
            }
            return;
        }
        let _asking = Asking {
            cache,
            chain,
            since_ms: started,
        };
        // Several upstreams: the best head they know, asked of each (their answers teach the
        // race their heads, so a lagging one gets no read of the tip), then that block from one
        // that has it. One: its latest block.
        let latest = if self.config.upstream_urls.len() > 1 {
            match self.ask_best_head().await {
                Some(number) => {
                    let number = crate::hex::encode_quantity(number);
                    self.ask_block("eth_getBlockByNumber", json!([number, false]))
                        .await
                }
                None => None,
            }
        } else {
            self.ask_block("eth_getBlockByNumber", json!(["latest", false]))
                .await
        };
        let Some((head, latest)) = latest else {
            return;
        };
        let mut headers = vec![head.clone()];
        loop {
            let Some(parent) = cache.borrow().missing_parent(chain, &headers) else {
                break;
            };
            match self
                .ask_block("eth_getBlockByHash", json!([parent, false]))
                .await
            {
                Some((header, _)) if header.hash == parent => headers.push(header),
                _ => break,
            }
        }
        let now = self.backend.now_ms();
        let adopted = cache.borrow_mut().adopt(chain, &headers, started, now);
        if let crate::cache::chain::Adopted::Reorg { fork } = adopted {
            self.backend.emit(
                &Metric::new("cache_reorg", "", "fork")
                    .value("count", 1.0)
                    .field("fork", fork)
                    .field("head", head.number)
                    .field("head_hash", head.hash.clone()),
            );
        }
        // The head ask's own answer is a client's read too.
        let latest_key = key_of("eth_getBlockByNumber", &json!(["latest", false]));
        let _ = cache
            .borrow_mut()
            .store(chain, &latest_key, About::Head, &latest, now, settings);
        // The genesis once, and again after a reorg: a dev chain started anew with a higher
        // head does not link either, and its finalized block may be below the old one's.
        let reorg = matches!(adopted, crate::cache::chain::Adopted::Reorg { .. });
        if reorg || cache.borrow().genesis(chain).is_none() {
            if let Some((genesis, _)) = self
                .ask_block("eth_getBlockByNumber", json!(["0x0", false]))
                .await
            {
                if cache.borrow_mut().set_genesis(chain, &genesis.hash) {
                    self.backend.emit(
                        &Metric::new("cache_reorg", "", "genesis")
                            .value("count", 1.0)
                            .field("genesis", genesis.hash.clone()),
                    );
                }
            }
        }
        if cache.borrow().needs_finalized(chain, now) {
            let finalized = match self.ask_finalized().await {
                Finalized::Block(number) => Some(number),
                Finalized::NoTag => Some(head.number.saturating_sub(settings.finality_depth)),
                // The one known holds; asked again in FINALIZED_FRESH_MS.
                Finalized::Failed => None,
            };
            let now = self.backend.now_ms();
            match finalized {
                Some(finalized) => {
                    cache
                        .borrow_mut()
                        .set_finalized(chain, finalized.min(head.number), now)
                }
                None => cache.borrow_mut().finalized_unanswered(chain, now),
            }
        }
    }

    /// The best head the upstreams know: `eth_blockNumber` asked as a client's is (of every
    /// upstream, [`CallKind::ReadMerged`]), `None` when it could not be had.
    async fn ask_best_head(&self) -> Option<u64> {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}"#;
        let reply = self
            .backend
            .post_read(
                body,
                CallKind::of_method("eth_blockNumber"),
                BlockNeed::Head,
                self.config.upstream_timeout_ms,
            )
            .await
            .ok()?;
        crate::upstream::heads::head_of(&reply.body)
    }

    /// The `finalized` block's number ([`Finalized`]).
    async fn ask_finalized(&self) -> Finalized {
        let answer = self
            .ask_own("eth_getBlockByNumber", json!(["finalized", false]))
            .await;
        Finalized::of(answer.as_ref())
    }

    /// Asks the upstream for a block: its header and its `result`'s JSON text; `None` when it
    /// could not be had.
    async fn ask_block(&self, method: &str, params: Value) -> Option<(Header, String)> {
        let Some(Answer::Result(result)) = self.ask_own(method, params).await else {
            return None;
        };
        let header = Header::of_block(&serde_json::from_str(&result).ok()?)?;
        Some((header, result))
    }

    /// Asks the upstream a question of the relay's own ([`CallKind::OwnOther`]): its answer,
    /// `None` when there was none.
    async fn ask_own(&self, method: &str, params: Value) -> Option<Answer> {
        let need = BlockNeed::of(method, &params);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let reply = self
            .backend
            .post_read(
                &body.to_string(),
                CallKind::OwnOther,
                need,
                self.config.upstream_timeout_ms,
            )
            .await
            .ok()?;
        Answer::parse(&reply.body)
    }
}

/// The hash of the head `cache` knows on `chain`.
fn head_hash(cache: &RefCell<ReadCache>, chain: u64) -> Option<String> {
    cache
        .borrow()
        .view(chain)
        .and_then(|v| v.head())
        .map(|h| h.hash.clone())
}

/// The shared cache's key of read `key` on `chain` whose genesis block is `genesis`: a path of
/// the SHA-256 of the three (hex), so that no client's text is in it and a chain started anew
/// (another genesis) finds nothing of the old one. The edge makes it a URL of its own origin.
pub fn shared_key(chain: u64, genesis: &str, key: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(chain.to_be_bytes());
    hash.update(genesis.as_bytes());
    hash.update([0]);
    hash.update(key.as_bytes());
    format!(
        "{chain}/{}",
        crate::hex::encode(&hash.finalize()).trim_start_matches("0x")
    )
}
