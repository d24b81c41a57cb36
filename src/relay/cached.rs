//! A client's read through the read cache ([`crate::cache`]), when `CACHE` is on: answered from
//! what is kept when it still holds, else asked of the upstream once for every identical read in
//! flight, and kept when the chain says it may be. The cache's head is asked here, one ask at a
//! time per chain (`eth_getBlockByNumber("latest", false)`, then each parent by hash until it
//! links to the blocks known, then the `finalized` block at most every
//! [`crate::cache::FINALIZED_FRESH_MS`]); its own answer serves the same read by clients.

use super::{Backend, Relay};
use crate::cache::chain::Adopted;
use crate::cache::finality::{BeforeAsk, Finalized};
use crate::cache::flight::Wake;
use crate::cache::header::Header;
use crate::cache::pin::{probe_params, Refusal};
use crate::cache::policy::{key_of, About, PinnedAnswer};
use crate::cache::{Begin, CacheSettings, Completeness, Read, ReadCache, Stored, Tag};
use crate::config::RelaySecret;
use crate::jsonrpc::{Answer, Request, Response};
use crate::metrics::Metric;
use crate::upstream::heads::{null_means_behind, BlockNeed};
use crate::upstream::{error_metric, CallKind, UpstreamError, UpstreamReply};
use futures_util::future::select;
use serde_json::{json, Value};
use std::cell::RefCell;

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
                let _ = cache.land(self.chain, self.key, None, self.since_ms);
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

/// How often a read waiting for an identical one in flight (or for the head ask) looks, ms, on a
/// platform without a signal ([`Backend::signal`]).
const FOLLOW_POLL_MS: u64 = 2;

/// What a read waits on for another request's work ([`Backend::signal`]).
pub type Waiting = std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>;

/// A read as it was asked of the upstream ([`Relay::ask_read`]): the request sent, its reply
/// and answer, whether it was asked of its block by hash, and whether its answer may be kept.
struct Asked {
    /// The request sent (the client's, or the same read asked of its block by hash).
    sent: Request,
    reply: Result<UpstreamReply, UpstreamError>,
    answer: Option<Answer>,
    /// Whether `sent` asked of the block by its hash ([`ReadCache::pin`]) and was answered so.
    pinned: bool,
    /// Whether the answer may be kept (not one asked again by number after a pinned ask failed).
    keep: bool,
}

impl Asked {
    /// The upstream's head when it answered, when known ([`crate::upstream::Answerer`]).
    fn answerer_head(&self) -> Option<u64> {
        self.reply.as_ref().ok()?.answerer?.head
    }
}

impl<B: Backend> Relay<'_, B> {
    /// Answers `req`, a read, through `cache` ([`crate::cache`]): a read the cache knows how to
    /// keep is answered from it while what it keeps holds ([`Relay::kept`]); else it is asked of
    /// the upstream as [`Relay::proxy`] asks it, once for identical reads in flight
    /// ([`Relay::lead`], [`Relay::follow`]), and its `result` kept when the chain lets it be.
    /// With `Cache-Control: no-cache` nothing kept is used (the answer is still kept).
    pub(super) async fn cached_read(&self, req: &Request, cache: &RefCell<ReadCache>) -> Response {
        let about = About::of(&req.method, &req.params);
        if about == About::Never {
            return self.proxy(req).await;
        }
        let chain = self.config.chain_key();
        let key = key_of(&req.method, &req.params);
        if !self.bypass_cache {
            if let Some(result) = self.kept(cache, chain, about, &key).await {
                self.seen(true);
                return Response::new(&req.response_id(), Answer::Result(result));
            }
        }
        self.seen(false);
        let give_up_ms = self.config.upstream_timeout_ms.saturating_add(1_000);
        let started = self.backend.now_ms();
        let begin = cache.borrow_mut().begin(chain, &key, started, give_up_ms);
        match begin {
            Begin::Follow => {
                let until = started.saturating_add(give_up_ms);
                self.follow(req, cache, chain, &key, until).await
            }
            Begin::Lead => self.lead(req, cache, about, &key, started).await,
        }
    }

    /// The result kept for `key`, a read about `about` on `chain`, when it still holds: the head
    /// is asked first when the answer depends on it and it is older than `CACHE_HEAD_MS` (or the
    /// finalized block is due); then the isolate's memory, then the data centre's cache for an
    /// answer that may hold for good.
    async fn kept(
        &self,
        cache: &RefCell<ReadCache>,
        chain: u64,
        about: About,
        key: &str,
    ) -> Option<String> {
        let settings = self.config.cache_settings;
        let now = self.backend.now_ms();
        let stale_final =
            matches!(about, About::Number(_)) && cache.borrow().needs_finalized(chain, now);
        // Several upstreams: their heads are asked now and then even while the head is fresh
        // (heard on the head watch), so that a node stuck behind stays known and gets no read
        // of the blocks it lacks.
        let heads_due = self.config.upstream_urls.len() > 1
            && about != About::Never
            && cache.borrow().upstream_heads_due(chain, now);
        if stale_final || heads_due || cache.borrow().needs_head(chain, about, now, &settings) {
            self.ask_head(cache, chain, &settings).await;
        }
        let now = self.backend.now_ms();
        let found = cache.borrow_mut().lookup(chain, key, about, now, &settings);
        self.emit_stats(cache, now);
        if let Some(result) = found {
            return Some(result.to_string());
        }
        let shared = self.shared_key(cache, chain, about, key)?;
        let result = self.backend.shared_get(&shared).await?;
        cache.borrow_mut().keep_final(chain, key, &result);
        Some(result)
    }

    /// A read that follows an identical one in flight: the leader's answer once it lands, or,
    /// when the leader failed or did not land by `until_ms`, the read asked for itself (nothing
    /// kept). It waits on the platform's signal ([`Backend::signal`], the leader's landing wakes
    /// it), else looks every [`FOLLOW_POLL_MS`] on its own timer: a Rust waker called from the
    /// leader's request would run the follower's answer in that request's I/O context, which
    /// workerd refuses ("Cannot perform I/O on behalf of a different request").
    async fn follow(
        &self,
        req: &Request,
        cache: &RefCell<ReadCache>,
        chain: u64,
        key: &str,
        until_ms: u64,
    ) -> Response {
        let wait = until_ms.saturating_sub(self.backend.now_ms());
        self.wait_signalled(|wake| cache.borrow_mut().on_land(chain, key, wake), wait)
            .await;
        loop {
            let landed = cache.borrow_mut().take_landed(chain, key);
            match landed {
                Some(Some(answer)) => return Response::new(&req.response_id(), answer),
                Some(None) => return self.proxy(req).await,
                None if self.backend.now_ms() > until_ms => {
                    cache.borrow_mut().leave_flight(chain, key);
                    return self.proxy(req).await;
                }
                None => self.backend.sleep(FOLLOW_POLL_MS).await,
            }
        }
    }

    /// Waits up to `wait_ms` for another request's work to call the wake handed to `register`
    /// (the platform's signal, [`Backend::signal`]); returns at once on a platform without one
    /// (the caller then looks on its own timer).
    async fn wait_signalled(&self, register: impl FnOnce(Wake), wait_ms: u64) {
        if let Some((wake, waiting)) = self.backend.signal() {
            register(wake);
            let _ = select(waiting, Box::pin(self.backend.sleep(wait_ms))).await;
        }
    }

    /// The leader of a read of `key` about `about` begun at `started_ms`: asks the upstream
    /// ([`Relay::ask_read`]); an answer the chain does not prove complete from an upstream that
    /// may lack its block is asked again elsewhere ([`Relay::ask_elsewhere`]); the answer is kept
    /// when the chain lets it be ([`Relay::keep`]), landed for the followers, and an answer that
    /// holds for good written to the data centre's cache.
    async fn lead(
        &self,
        req: &Request,
        cache: &RefCell<ReadCache>,
        about: About,
        key: &str,
        started_ms: u64,
    ) -> Response {
        let chain = self.config.chain_key();
        let mut flying = Flying {
            cache,
            chain,
            key,
            since_ms: started_ms,
            landed: false,
        };
        // The head before the ask: an answer is kept only if the head is still the same after,
        // or no head could change it.
        let before = BeforeAsk::of(cache.borrow().view(chain));
        let mut asked = self.ask_read(req, cache, about).await;
        let mut stored = self.keep(cache, key, req, about, &asked, &before);
        if let Some(again) = self.suspect(cache, req, about, &asked, stored.as_ref()) {
            if let Some(end) = again {
                let other = self.ask_elsewhere(&asked, end).await;
                // An answer asked again that failed (a timeout, a rate limit, an error) leaves
                // the first: the client gets no worse than without the cache.
                if matches!(other.answer, Some(Answer::Result(_))) {
                    asked = other;
                    stored = self.keep(cache, key, req, about, &asked, &before);
                }
            }
            let kept = stored.as_ref().is_some_and(|s| s.tag.is_some());
            cache.borrow_mut().count_suspect(again.is_some(), kept);
        }
        if let Some(Completeness::Contradicted { block }) = stored.as_ref().map(|s| s.completeness)
        {
            self.backend.emit(
                &Metric::new("cache_bloom_off", "", "contradicted")
                    .value("count", 1.0)
                    .field("block", block)
                    .field("method", req.method.clone()),
            );
        }
        let is_final = stored.is_some_and(|s| s.tag == Some(Tag::Final));
        // An answer that holds for good goes to the data centre's cache after the followers have
        // it: copied only when followers wait for it too (a 12 MB answer is not held twice).
        let copy = is_final && cache.borrow().followers(chain, key) > 0;
        let for_shared = if copy { asked.answer.clone() } else { None };
        let now = self.backend.now_ms();
        let back = cache.borrow_mut().land(chain, key, asked.answer, now);
        flying.landed = true;
        let final_result = match for_shared.or(back.filter(|_| is_final)) {
            Some(Answer::Result(result)) => Some(result),
            _ => None,
        };
        if let Some(result) = final_result {
            if let Some(shared) = self.shared_key(cache, chain, about, key) {
                self.backend.shared_put(&shared, &result).await;
            }
        }
        match asked.reply {
            Ok(reply) => self.proxied_response(req, reply.body),
            Err(e) => {
                self.backend.emit(&error_metric(&req.method, &e));
                Response::error(&req.response_id(), &e.to_rpc())
            }
        }
    }

    /// Asks the upstream `req` (about `about`), routed by the block the client named (an
    /// upstream behind it is skipped). About an unfinalized block by number, or the head, a read
    /// whose answer names no block is asked of that block by its hash (EIP-1898,
    /// [`ReadCache::pin`]): an upstream still on another fork, or a node behind it, cannot answer
    /// for it. Not that block's upstream, or not a form it reads ([`PinnedAnswer`]): asked again
    /// as the client asked, and not kept.
    async fn ask_read(&self, req: &Request, cache: &RefCell<ReadCache>, about: About) -> Asked {
        let chain = self.config.chain_key();
        let now = self.backend.now_ms();
        let head_ms = self.config.cache_settings.head_ms;
        // At the head too: a node a block behind answers `latest` from its own state.
        let number = match about {
            About::Number(n) => Some(n),
            About::Head => cache.borrow().head_number(chain),
            _ => None,
        };
        let pinned = number.and_then(|n| {
            cache
                .borrow()
                .pin(chain, &req.method, &req.params, n, now, head_ms)
                .map(|(method, params)| Request {
                    id: req.id.clone(),
                    method: method.to_string(),
                    params,
                })
        });
        let Some(sent) = pinned else {
            return self
                .ask_as(req.clone(), &req.method, &req.params, false)
                .await;
        };
        let asked = self.ask_as(sent, &req.method, &req.params, true).await;
        // No answer at all: given as it is, not asked again.
        let said = asked.answer.as_ref().map(PinnedAnswer::of);
        let form_read = match said {
            Some(PinnedAnswer::Answered) => {
                cache.borrow_mut().pin_form(chain).answered();
                true
            }
            Some(PinnedAnswer::Unsupported) => self.pin_refused(cache, chain).await,
            _ => true,
        };
        // Refused as the form, by an upstream that reads the form: the client's params are what
        // it refused, as it would by number (asked again, a malformed read would cost two).
        let refused_params = said == Some(PinnedAnswer::Unsupported) && form_read;
        if refused_params
            || !matches!(
                said,
                Some(PinnedAnswer::Unsupported | PinnedAnswer::Unknown)
            )
        {
            return asked;
        }
        // Its answer goes to the followers too, and is not kept.
        let mut again = self
            .ask_as(req.clone(), &req.method, &req.params, false)
            .await;
        again.keep = false;
        again
    }

    /// A read asked by its block's hash on `chain` was refused as a form the upstream does not
    /// read: counted only when a probe of the form with params known good is refused too
    /// ([`crate::cache::pin`]: a client's malformed params get the same refusal), one probe per
    /// [`crate::cache::pin::PIN_PROBE_MS`] at most. Returns whether the upstream reads the form
    /// (the probe's verdict; `false` when none could be had).
    async fn pin_refused(&self, cache: &RefCell<ReadCache>, chain: u64) -> bool {
        let now = self.backend.now_ms();
        if let Refusal::Judged { read } = cache.borrow_mut().pin_form(chain).refused(now) {
            return read;
        }
        let Some(head) = head_hash(cache, chain) else {
            return false;
        };
        let probe = self.ask_own("eth_getBalance", probe_params(&head)).await;
        let read = match probe.as_ref().map(PinnedAnswer::of) {
            Some(PinnedAnswer::Unsupported) => false,
            // Answered, or the block not the upstream's: the form itself is read.
            Some(_) => true,
            // No answer: nothing learned; the refusal is not counted.
            None => return false,
        };
        let now = self.backend.now_ms();
        cache.borrow_mut().pin_form(chain).probed(read, now);
        read
    }

    /// Asks the upstream `sent`, a read routed as the client's `method` with `params` is.
    async fn ask_as(&self, sent: Request, method: &str, params: &Value, pinned: bool) -> Asked {
        let (kind, need) = (CallKind::of_method(method), BlockNeed::of(method, params));
        self.post_asked(sent, kind, need, None, pinned, true).await
    }

    /// `asked` once more, because its upstream may lack block `end` that its answer is about: of
    /// another upstream whose head is known to have it (routed by that block, whatever form the
    /// read names it in), else of the same set
    /// ([`crate::upstream::platform::Platform::post_read_elsewhere`]).
    async fn ask_elsewhere(&self, asked: &Asked, end: u64) -> Asked {
        let not = asked
            .reply
            .as_ref()
            .ok()
            .and_then(|r| r.answerer)
            .map(|a| a.index);
        let (sent, kind) = (asked.sent.clone(), CallKind::of_method(&asked.sent.method));
        let need = BlockNeed::Number(end);
        self.post_asked(sent, kind, need, not, asked.pinned, asked.keep)
            .await
    }

    /// Posts `sent` as a call of `kind` routed by `need` (away from upstream `not` when given)
    /// and reads its answer ([`Asked`], with `pinned` and `keep` as given).
    async fn post_asked(
        &self,
        sent: Request,
        kind: CallKind,
        need: BlockNeed,
        not: Option<usize>,
        pinned: bool,
        keep: bool,
    ) -> Asked {
        let timeout_ms = self.config.upstream_timeout_ms;
        let body = sent.to_json();
        let reply = match not {
            Some(not) => {
                self.backend
                    .post_read_elsewhere(&body, kind, need, timeout_ms, not)
                    .await
            }
            None => self.backend.post_read(&body, kind, need, timeout_ms).await,
        };
        let answer = reply.as_ref().ok().and_then(|r| Answer::parse(&r.body));
        Asked {
            sent,
            reply,
            answer,
            pinned,
            keep,
        }
    }

    /// Whether `asked`'s answer (to `req`, about `about`; `stored`: what the cache did with it)
    /// is one a node that lacks the block may have given, and if so the block to ask it again
    /// of ([`Relay::ask_elsewhere`]): an answer the chain does not prove complete
    /// ([`Completeness::Unproven`]), asked again when its upstream may lack the block
    /// ([`Relay::may_lack`]); `null` for a block by number the chain has, within `MAX_HEAD_LAG`
    /// of the cache's head (announced, then null, go-ethereum#27353), from a method whose `null`
    /// means no such block ([`null_means_behind`]: not a transaction index out of range), always.
    /// `None`: not suspect; `Some(None)`: suspect, not asked again.
    fn suspect(
        &self,
        cache: &RefCell<ReadCache>,
        req: &Request,
        about: About,
        asked: &Asked,
        stored: Option<&Stored>,
    ) -> Option<Option<u64>> {
        let chain = self.config.chain_key();
        if let Some(Completeness::Unproven { end }) = stored.map(|s| s.completeness) {
            return Some(end.filter(|&end| self.may_lack(cache, chain, end, asked)));
        }
        let null = matches!(&asked.answer, Some(Answer::Result(r)) if r.trim() == "null");
        let head = cache.borrow().head_number(chain);
        let near = |n: u64| {
            head.is_some_and(|h| n <= h && n.saturating_add(self.config.max_head_lag) >= h)
        };
        match about {
            About::Number(n) if null && near(n) && null_means_behind(&req.method) => Some(Some(n)),
            _ => None,
        }
    }

    /// Whether the upstream that gave `asked` may lack block `end` (the last its answer is
    /// about): it is above that upstream's last known head, or within `MAX_HEAD_LAG` of the
    /// cache's head on `chain` (a load balancer's nodes a block or two apart).
    fn may_lack(&self, cache: &RefCell<ReadCache>, chain: u64, end: u64, asked: &Asked) -> bool {
        let cache_head = cache.borrow().head_number(chain);
        asked.answerer_head().is_some_and(|head| end > head)
            || cache_head.is_some_and(|head| end.saturating_add(self.config.max_head_lag) >= head)
    }

    /// Keeps `asked`'s answer to `req` (about `about`) as `key`'s when it may be kept: a result,
    /// not one asked again by number after a pinned ask failed, and the head the same as before
    /// the ask (`before`), or the answer one no head changes ([`BeforeAsk::still_keeps`]: by
    /// hash, the chain's, about a block finalized before). `None` when it was not offered to the
    /// cache.
    fn keep(
        &self,
        cache: &RefCell<ReadCache>,
        key: &str,
        req: &Request,
        about: About,
        asked: &Asked,
        before: &BeforeAsk,
    ) -> Option<Stored> {
        let chain = self.config.chain_key();
        let Some(Answer::Result(result)) = asked.answer.as_ref().filter(|_| asked.keep) else {
            return None;
        };
        if !before.still_keeps(cache.borrow().view(chain), about, result) {
            return None;
        }
        let read = Read {
            method: &req.method,
            params: &req.params,
            about,
            pinned: asked.pinned,
            answerer_head: asked.answerer_head(),
        };
        let now = self.backend.now_ms();
        let mut settings = self.config.cache_settings;
        // CACHE_BLOOM_PROOF's `auto` on this chain (CHAIN_ID, else the one the upstream said).
        settings.proof = self.config.cache_proof.rule(self.known_chain_id());
        Some(
            cache
                .borrow_mut()
                .store(chain, key, read, result, now, &settings),
        )
    }

    /// The shared cache's key of a read on `chain` (`key`, [`key_of`]) about `about`, when
    /// `RELAY_SECRET` is set, its answer may hold for good ([`ReadCache::may_be_final`]) and the
    /// chain's genesis hash is known ([`shared_key`]).
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
        let secret = self.config.relay_secret.as_ref()?;
        Some(shared_key(secret, chain, cache.genesis(chain)?, key))
    }

    /// After this body's sends: the cache asks its head again at the next read that depends on
    /// it ([`ReadCache::suspect`]), so that a client reading right after its send (its balance,
    /// its nonce at `latest`) does not get the head from before it.
    pub(super) fn after_sends(&self) {
        if let Some(cache) = self.backend.read_cache().filter(|_| self.config.cache) {
            if let Ok(mut cache) = cache.try_borrow_mut() {
                cache.suspect(self.config.chain_key(), self.backend.now_ms());
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
                .field("heads_heard", stats.heads_heard)
                .field("suspect", stats.suspect)
                .field("suspect_asked_again", stats.suspect_asked_again)
                .field("suspect_kept", stats.suspect_kept)
                .field("suspect_unkept", stats.suspect_unkept),
        );
    }

    /// Asks `chain`'s head for the cache (one ask at a time: a read that finds one under way
    /// waits for it, at most [`HEAD_ASK_GIVE_UP_MS`]): the latest block ([`Relay::ask_latest`]),
    /// its parents by hash until it links to the blocks known ([`Relay::walk_back`]), then the
    /// genesis when due ([`Relay::learn_genesis`]) and the finalized block when due
    /// ([`Relay::learn_finalized`]). A reorg is a `cache_reorg` line. An ask that fails leaves
    /// the head as it was (and older than `CACHE_HEAD_MS`: nothing at the head is served).
    pub(super) async fn ask_head(
        &self,
        cache: &RefCell<ReadCache>,
        chain: u64,
        settings: &CacheSettings,
    ) {
        let started = self.backend.now_ms();
        let claimed = cache
            .borrow_mut()
            .claim_refresh(chain, started, HEAD_ASK_GIVE_UP_MS);
        if !claimed {
            // On the platform's signal, else its own timer, as a follower ([`Relay::follow`]).
            let on_refreshed = |wake| cache.borrow_mut().on_refreshed(chain, wake);
            self.wait_signalled(on_refreshed, HEAD_ASK_GIVE_UP_MS).await;
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
        let Some((head, latest)) = self.ask_latest(cache, chain).await else {
            return;
        };
        let headers = self.walk_back(cache, chain, head.clone()).await;
        let now = self.backend.now_ms();
        let max_lag = self.config.max_head_lag;
        let adopted = cache
            .borrow_mut()
            .adopt(chain, &headers, started, now, max_lag);
        if let Adopted::Reorg { fork } = adopted {
            self.backend.emit(
                &Metric::new("cache_reorg", "", "fork")
                    .value("count", 1.0)
                    .field("fork", fork)
                    .field("head", head.number)
                    .field("head_hash", head.hash.clone()),
            );
        }
        // The head ask's own answer is a client's read too.
        let params = json!(["latest", false]);
        let latest_key = key_of("eth_getBlockByNumber", &params);
        let read = Read {
            method: "eth_getBlockByNumber",
            params: &params,
            about: About::Head,
            pinned: false,
            answerer_head: None,
        };
        let _ = cache
            .borrow_mut()
            .store(chain, &latest_key, read, &latest, now, settings);
        self.learn_genesis(cache, chain, matches!(adopted, Adopted::Reorg { .. }))
            .await;
        self.learn_finalized(cache, chain, head.number, settings)
            .await;
    }

    /// `chain`'s latest block: with several upstreams, the best head they know, asked of each
    /// (their answers teach the race their heads, so a lagging one gets no read of the tip;
    /// [`ReadCache::upstream_heads_asked`]), then that block from one that has it; with one, its
    /// latest block.
    async fn ask_latest(&self, cache: &RefCell<ReadCache>, chain: u64) -> Option<(Header, String)> {
        if self.config.upstream_urls.len() < 2 {
            return self
                .ask_block("eth_getBlockByNumber", json!(["latest", false]))
                .await;
        }
        let now = self.backend.now_ms();
        cache.borrow_mut().upstream_heads_asked(chain, now);
        let best = self.ask_best_head().await?;
        // eth_blockNumber says it while its block is asked (of a node with a slow tail, maybe).
        let now = self.backend.now_ms();
        cache.borrow_mut().note_best(chain, best, now);
        let number = crate::hex::encode_quantity(best);
        self.ask_block("eth_getBlockByNumber", json!([number, false]))
            .await
    }

    /// `head` and its parents, until they link to the blocks `chain`'s view knows
    /// ([`ReadCache::missing_parent`], at most [`crate::cache::chain::MAX_WALK`]): the blocks
    /// between the head known and `head` first, by number in one batch ([`Relay::ask_between`]:
    /// after an idle spell, one round trip instead of one per block), then any parent still
    /// missing by hash, one at a time (a reorg).
    async fn walk_back(&self, cache: &RefCell<ReadCache>, chain: u64, head: Header) -> Vec<Header> {
        let mut headers = vec![head];
        let known = cache.borrow().head_number(chain);
        if let Some(known) = known {
            let between = self.ask_between(known, headers[0].number).await;
            for header in between {
                if cache.borrow().missing_parent(chain, &headers).as_deref() != Some(&header.hash) {
                    break;
                }
                headers.push(header);
            }
        }
        loop {
            let Some(parent) = cache.borrow().missing_parent(chain, &headers) else {
                return headers;
            };
            match self
                .ask_block("eth_getBlockByHash", json!([parent, false]))
                .await
            {
                Some((header, _)) if header.hash == parent => headers.push(header),
                _ => return headers,
            }
        }
    }

    /// The blocks above `known` and below `head`, newest first, asked by number in one batch
    /// (when there are at least two and at most [`crate::cache::chain::MAX_WALK`], within the
    /// upstreams' batch limit); each one answered that is a block object at its number, stopping
    /// at the first that is not.
    async fn ask_between(&self, known: u64, head: u64) -> Vec<Header> {
        let numbers: Vec<u64> = (known.saturating_add(1)..head).rev().collect();
        let kind = CallKind::OwnOther;
        if numbers.len() < 2
            || numbers.len() > crate::cache::chain::MAX_WALK
            || self.backend.batch_limit(kind) < numbers.len()
        {
            return Vec::new();
        }
        let members: Vec<Value> = numbers
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let number = crate::hex::encode_quantity(*n);
                json!({"jsonrpc": "2.0", "id": i + 1, "method": "eth_getBlockByNumber", "params": [number, false]})
            })
            .collect();
        let body = Value::Array(members).to_string();
        let timeout_ms = self.config.upstream_timeout_ms;
        let reply = self
            .backend
            .post_batch(&body, numbers.len(), kind, timeout_ms)
            .await;
        let parts = crate::upstream::batch::split_batch(&reply, numbers.len());
        let header = |part: Option<Result<UpstreamReply, UpstreamError>>| {
            let Some(Answer::Result(result)) = Answer::parse(&part?.ok()?.body) else {
                return None;
            };
            Header::of_block(&serde_json::from_str(&result).ok()?)
        };
        numbers
            .iter()
            .zip(parts)
            .map_while(|(n, part)| header(part).filter(|h| h.number == *n))
            .collect()
    }

    /// The genesis block's hash, once, and again after a reorg (`reorg`): a dev chain started
    /// anew with a higher head does not link either, and its finalized block may be below the
    /// old one's ([`ReadCache::set_genesis`]; another genesis is a `cache_reorg` line).
    async fn learn_genesis(&self, cache: &RefCell<ReadCache>, chain: u64, reorg: bool) {
        if !reorg && cache.borrow().genesis(chain).is_some() {
            return;
        }
        let Some((genesis, _)) = self
            .ask_block("eth_getBlockByNumber", json!(["0x0", false]))
            .await
        else {
            return;
        };
        if cache.borrow_mut().set_genesis(chain, &genesis.hash) {
            self.backend.emit(
                &Metric::new("cache_reorg", "", "genesis")
                    .value("count", 1.0)
                    .field("genesis", genesis.hash.clone()),
            );
        }
    }

    /// The finalized block, when due ([`ReadCache::needs_finalized`]): as `CACHE_FINALITY` says
    /// ([`crate::cache::Finality::asks_tag`]), the `finalized` tag, or the head (`head`) less
    /// `CACHE_FINALITY_DEPTH` (also for an upstream without the tag); at most the head less
    /// `MAX_HEAD_LAG`. An ask that fails keeps the one known, asked again in
    /// [`crate::cache::FINALIZED_FRESH_MS`].
    async fn learn_finalized(
        &self,
        cache: &RefCell<ReadCache>,
        chain: u64,
        head: u64,
        settings: &CacheSettings,
    ) {
        let now = self.backend.now_ms();
        if !cache.borrow().needs_finalized(chain, now) {
            return;
        }
        let by_depth = Some(head.saturating_sub(settings.finality_depth));
        let finalized = if settings.finality.asks_tag(self.known_chain_id()) {
            match self.ask_finalized().await {
                Finalized::Block(number) => Some(number),
                Finalized::NoTag => by_depth,
                Finalized::Failed => None,
            }
        } else {
            by_depth
        };
        let now = self.backend.now_ms();
        // Never within MAX_HEAD_LAG of the head: a chain whose `finalized` is (nearly) its head
        // (Avalanche, BSC) would otherwise take a node a block behind's `[]` as final.
        let cap = head.saturating_sub(self.config.max_head_lag);
        match finalized {
            Some(finalized) => cache
                .borrow_mut()
                .set_finalized(chain, finalized.min(cap), now),
            None => cache.borrow_mut().finalized_unanswered(chain, now),
        }
    }

    /// The best head the upstreams know: `eth_blockNumber` asked as a client's is (of every
    /// upstream, [`CallKind::ReadMerged`]), `None` when it could not be had.
    pub(super) async fn ask_best_head(&self) -> Option<u64> {
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

/// The format of the answers the relay keeps in the shared cache, named in each key: a release
/// that changes what may be kept (or finds that an older one kept what it should not) bumps it,
/// and older releases' entries are never read again. 2: kept only when the chain proves them
/// complete ([`crate::cache::proof`]), keys under `RELAY_SECRET`.
pub const SHARED_FORMAT: u32 = 2;

/// The shared cache's key of read `key` on `chain` whose genesis block is `genesis`: a path of
/// the format ([`SHARED_FORMAT`]), the chain and the HMAC-SHA256 under `secret` of the chain,
/// the genesis and the read (hex), so that no client's text is in it, a chain started anew
/// (another genesis) finds nothing of the old one, and no one without the secret (another Worker
/// on the zone) can write an entry the relay would read. The edge makes it a URL of its own
/// origin.
pub fn shared_key(secret: &RelaySecret, chain: u64, genesis: &str, key: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.bytes()).expect("any key length");
    mac.update(&chain.to_be_bytes());
    mac.update(genesis.as_bytes());
    mac.update(&[0]);
    mac.update(key.as_bytes());
    let tag = mac.finalize().into_bytes();
    format!(
        "v{SHARED_FORMAT}/{chain}/{}",
        crate::hex::encode(&tag).trim_start_matches("0x")
    )
}
