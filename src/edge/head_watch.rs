//! The head watch's sockets ([`crate::cache::head_watch`]): a request whose reads went through
//! the cache opens its chain's watch when the isolate has none (or the live one nears its end),
//! and the Worker hands its [`KeepAlive`] to that request's `waitUntil`, which keeps the socket's
//! I/O alive after the response. Each `newHeads` header goes to the isolate's read cache
//! ([`crate::cache::ReadCache::heard_head`]); a watch that fails is logged
//! (`head_watch_failed`, with the chain) and the next waits [`head_watch::RETRY_MS`], doubled
//! for each failure in a row ([`HeadWatch::ended`]).

use crate::cache::head_watch::{self, HeadWatch, WatchMessage};
use crate::config::Config;
use crate::edge::runtime::now_ms;
use crate::edge::websocket::socket::UpstreamSocket;
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::pin;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_log, Delay, WebSocket, WebsocketEvent};

thread_local! {
    /// Each chain's watches in this isolate.
    static WATCHES: RefCell<HashMap<u64, HeadWatch>> = RefCell::new(HashMap::new());
}

/// A watch opened by a request: its I/O is that request's, so the request hands
/// [`KeepAlive::closed`] to its own `waitUntil`.
pub struct KeepAlive(oneshot::Receiver<()>);

impl KeepAlive {
    /// Resolves when the watch has closed (at most [`head_watch::WATCH_MS`] after it was
    /// wanted, or when it failed).
    pub async fn closed(self) {
        let _ = self.0.await;
    }
}

/// Opens `config`'s chain's head watch when it is on (`CACHE` and `CACHE_HEAD_WATCH`) and the
/// isolate wants one ([`HeadWatch::want`]); the request that opened it must hand the
/// [`KeepAlive`] to its `waitUntil`.
pub fn open_if_wanted(config: &Config) -> Option<KeepAlive> {
    if !config.cache || !config.cache_head_watch || config.upstream_ws_urls.is_empty() {
        return None;
    }
    let chain = config.chain_key();
    let wanted_ms = now_ms();
    let generation = WATCHES.with(|w| w.borrow_mut().entry(chain).or_default().want(wanted_ms))?;
    let (closed, on_close) = oneshot::channel::<()>();
    let config = config.clone();
    spawn_local(async move {
        // The whole watch, its connect and subscription too, ends WATCH_MS after it was wanted:
        // inside its request's `waitUntil`, so that the runtime never cancels it unfinished.
        let until_ms = wanted_ms + head_watch::WATCH_MS;
        let timer = pin!(Delay::from(Duration::from_millis(
            until_ms.saturating_sub(now_ms())
        )));
        let subscribed = Cell::new(false);
        let outcome = match select(
            pin!(watch(&config, chain, generation, wanted_ms, &subscribed)),
            timer,
        )
        .await
        {
            Either::Left((outcome, _)) => outcome,
            Either::Right(_) if subscribed.get() => Ok(()),
            Either::Right(_) => Err(Ended::Failed(format!(
                "not subscribed within {} ms",
                head_watch::WATCH_MS
            ))),
        };
        ended(&config, chain, generation, outcome);
        drop(closed);
    });
    Some(KeepAlive(on_close))
}

/// Why a watch ended before its time.
enum Ended {
    /// It could not connect, its subscription was refused or unanswered, the socket closed or
    /// failed: why (the URL redacted).
    Failed(String),
    /// It announced no block while the chain moved past the last one it announced
    /// ([`head_watch::is_silent`]): the URL's index, the last block it announced (or the head
    /// when it subscribed), and the head then.
    Silent { url: usize, heard: u64, head: u64 },
}

/// Watch `generation` of `chain` ended with `outcome`: the isolate's [`HeadWatch`] is told
/// (a silent one hands over to the next URL, [`HeadWatch::silent`]); one that failed is a
/// `head_watch_failed` line, one that was silent a `head_watch_silent` line.
fn ended(config: &Config, chain: u64, generation: u64, outcome: Result<(), Ended>) {
    let urls = config.upstream_ws_urls.len();
    let hold_ms = WATCHES.with(|w| {
        let mut watches = w.borrow_mut();
        let watch = watches.get_mut(&chain)?;
        match &outcome {
            Err(Ended::Silent { url, .. }) => watch.silent(generation, now_ms(), *url, urls),
            other => watch.ended(generation, now_ms(), other.is_err()),
        }
    });
    let chain_field = (
        "chain",
        crate::edge::runtime::chain_of(config).map_or(Value::Null, Value::from),
    );
    match outcome {
        Ok(()) => {}
        Err(Ended::Silent { url, heard, head }) => {
            let fields = [
                chain_field,
                ("upstream", Value::from(config.upstream_ws_name(url))),
                ("heard", Value::from(heard)),
                ("head", Value::from(head)),
                ("retry_ms", Value::from(hold_ms.unwrap_or(0))),
            ];
            console_log!("{}", crate::log::line("head_watch_silent", &fields));
        }
        Err(Ended::Failed(why)) => {
            let Some(hold_ms) = hold_ms else {
                return;
            };
            let fields = [
                chain_field,
                ("why", Value::from(config.redact(&why))),
                ("retry_ms", Value::from(hold_ms)),
            ];
            console_log!("{}", crate::log::line("head_watch_failed", &fields));
        }
    }
}

/// A watch's socket, closed when the watch ends, however it ends.
struct Closing(WebSocket);

impl Drop for Closing {
    fn drop(&mut self) {
        let _ = self.0.close(Some(1000), Some("head watch ends"));
    }
}

/// One watch, wanted at `wanted_ms`: connects to `config`'s `UPSTREAM_WS_URL`s from the one
/// the isolate's watch says ([`HeadWatch::first_url`]), subscribes to `newHeads` (then sets
/// `subscribed`, and the watch is live, [`HeadWatch::live`]), and gives each header to the read
/// cache; the caller ends it at its time (dropped, its socket closes).
///
/// # Errors
/// Why it ended before its time ([`Ended`]): no socket, the subscription refused or unanswered
/// within `UPSTREAM_TIMEOUT_MS` (at most 10 s), the socket closed or failed; or silent while the
/// chain moved ([`head_watch::is_silent`], looked at every [`head_watch::SILENCE_CHECK_MS`]).
async fn watch(
    config: &Config,
    chain: u64,
    generation: u64,
    wanted_ms: u64,
    subscribed: &Cell<bool>,
) -> Result<(), Ended> {
    let failed = |e: String| Ended::Failed(e);
    let first = WATCHES.with(|w| w.borrow().get(&chain).map_or(0, HeadWatch::first_url));
    let socket = UpstreamSocket::connect_from(config, first)
        .await
        .map_err(failed)?;
    let url = socket.index;
    let ws = Closing(socket.ws);
    let mut events = ws.0.events().map_err(|e| failed(e.to_string()))?;
    ws.0.send_with_str(head_watch::SUBSCRIBE)
        .map_err(|e| failed(e.to_string()))?;
    let answer_by = now_ms() + config.upstream_timeout_ms.min(10_000);
    let mut subscription: Option<String> = None;
    // The last block announced (before any, the cache's head when it subscribed, or when it was
    // first known: a fresh isolate's watch may subscribe before its first head ask lands).
    let mut heard: Option<u64> = None;
    loop {
        let wait = if subscription.is_some() {
            head_watch::SILENCE_CHECK_MS
        } else {
            answer_by.saturating_sub(now_ms())
        };
        let next = pin!(events.next());
        let timer = pin!(Delay::from(Duration::from_millis(wait)));
        let event = match select(next, timer).await {
            Either::Left((event, _)) => event,
            Either::Right(_) if subscription.is_none() => {
                return Err(failed("no answer to eth_subscribe newHeads".into()))
            }
            Either::Right(_) => {
                heard = check_silence(config, chain, url, heard)?;
                continue;
            }
        };
        let Some(text) = message_text(event)? else {
            continue;
        };
        match WatchMessage::read(&text) {
            WatchMessage::Subscribed(id) if subscription.is_none() => {
                subscription = Some(id);
                subscribed.set(true);
                heard = cache_head(config, chain);
                WATCHES.with(|w| {
                    let mut watches = w.borrow_mut();
                    let watch = watches.entry(chain).or_default();
                    watch.live(generation, wanted_ms);
                });
            }
            WatchMessage::Refused(why) => {
                return Err(failed(format!("eth_subscribe newHeads: {why}")))
            }
            WatchMessage::Head(id, header) if subscription.as_deref() == Some(id.as_str()) => {
                heard = Some(heard.map_or(header.number, |h| h.max(header.number)));
                crate::edge::runtime::read_cache(config)
                    .borrow_mut()
                    .heard_head(chain, &header, now_ms());
            }
            _ => {}
        }
    }
}

/// A live watch's look at the chain, every [`head_watch::SILENCE_CHECK_MS`] without a message:
/// `heard`, the last block it announced, against the head the read cache knows now. Gives what
/// the watch has heard from now on (the cache's head when it had heard of none yet).
///
/// # Errors
/// [`Ended::Silent`] (`url`, the URL's index): the chain moved past `heard` and the watch
/// announced nothing ([`head_watch::is_silent`]).
fn check_silence(
    config: &Config,
    chain: u64,
    url: usize,
    heard: Option<u64>,
) -> Result<Option<u64>, Ended> {
    let head = cache_head(config, chain);
    match (heard, head) {
        (Some(last), Some(head)) if head_watch::is_silent(last, head) => Err(Ended::Silent {
            url,
            heard: last,
            head,
        }),
        (None, head) => Ok(head),
        _ => Ok(heard),
    }
}

/// The text of the watch socket's next `event`: `None` for a message without text (binary).
///
/// # Errors
/// [`Ended::Failed`]: the upstream closed the socket (its code and reason when it gave them), or
/// the socket failed.
fn message_text(event: Option<worker::Result<WebsocketEvent>>) -> Result<Option<String>, Ended> {
    let failed = |e: String| Ended::Failed(e);
    match event {
        Some(Ok(WebsocketEvent::Message(message))) => Ok(message.text()),
        Some(Ok(WebsocketEvent::Close(close))) => Err(failed(format!(
            "closed by the upstream: {} {}",
            close.code(),
            close.reason()
        ))),
        Some(Err(e)) => Err(failed(format!("socket error: {e}"))),
        None => Err(failed("closed by the upstream".into())),
    }
}

/// The head the isolate's read cache knows on `chain`, block number.
fn cache_head(config: &Config, chain: u64) -> Option<u64> {
    crate::edge::runtime::read_cache(config)
        .borrow()
        .head_number(chain)
}
