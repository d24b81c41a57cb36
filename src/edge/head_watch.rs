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
    let chain = config.cache_chain();
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
            Either::Right(_) => Err(format!("not subscribed within {} ms", head_watch::WATCH_MS)),
        };
        let failed = outcome.is_err();
        let hold_ms = WATCHES.with(|w| {
            w.borrow_mut()
                .get_mut(&chain)
                .and_then(|watch| watch.ended(generation, now_ms(), failed))
        });
        if let (Err(why), Some(hold_ms)) = (outcome, hold_ms) {
            let fields = [
                (
                    "chain",
                    crate::edge::runtime::chain_of(&config).map_or(Value::Null, Value::from),
                ),
                ("why", Value::from(config.redact(&why))),
                ("retry_ms", Value::from(hold_ms)),
            ];
            console_log!("{}", crate::log::line("head_watch_failed", &fields));
        }
        drop(closed);
    });
    Some(KeepAlive(on_close))
}

/// A watch's socket, closed when the watch ends, however it ends.
struct Closing(WebSocket);

impl Drop for Closing {
    fn drop(&mut self) {
        let _ = self.0.close(Some(1000), Some("head watch ends"));
    }
}

/// One watch, wanted at `wanted_ms`: connects to `config`'s first `UPSTREAM_WS_URL` that
/// accepts, subscribes to `newHeads` (then sets `subscribed`, and the watch is live,
/// [`HeadWatch::live`]), and gives each header to the read cache; the caller ends it at its
/// time (dropped, its socket closes).
///
/// # Errors
/// Why it ended before its time: no socket, the subscription refused or unanswered within
/// `UPSTREAM_TIMEOUT_MS` (at most 10 s), the socket closed or failed.
async fn watch(
    config: &Config,
    chain: u64,
    generation: u64,
    wanted_ms: u64,
    subscribed: &Cell<bool>,
) -> Result<(), String> {
    let socket = UpstreamSocket::connect(config).await?;
    let ws = Closing(socket.ws);
    let mut events = ws.0.events().map_err(|e| e.to_string())?;
    ws.0.send_with_str(head_watch::SUBSCRIBE)
        .map_err(|e| e.to_string())?;
    let answer_by = now_ms() + config.upstream_timeout_ms.min(10_000);
    let mut subscription: Option<String> = None;
    loop {
        let event = if subscription.is_some() {
            events.next().await
        } else {
            let wait = answer_by.saturating_sub(now_ms());
            let next = pin!(events.next());
            let timer = pin!(Delay::from(Duration::from_millis(wait)));
            match select(next, timer).await {
                Either::Left((event, _)) => event,
                Either::Right(_) => return Err("no answer to eth_subscribe newHeads".into()),
            }
        };
        let text = match event {
            Some(Ok(WebsocketEvent::Message(message))) => match message.text() {
                Some(text) => text,
                None => continue,
            },
            Some(Ok(WebsocketEvent::Close(close))) => {
                return Err(format!(
                    "closed by the upstream: {} {}",
                    close.code(),
                    close.reason()
                ))
            }
            Some(Err(e)) => return Err(format!("socket error: {e}")),
            None => return Err("closed by the upstream".into()),
        };
        match WatchMessage::read(&text) {
            WatchMessage::Subscribed(id) if subscription.is_none() => {
                subscription = Some(id);
                subscribed.set(true);
                WATCHES.with(|w| {
                    let mut watches = w.borrow_mut();
                    let watch = watches.entry(chain).or_default();
                    watch.live(generation, wanted_ms);
                });
            }
            WatchMessage::Refused(why) => return Err(format!("eth_subscribe newHeads: {why}")),
            WatchMessage::Head(id, header) if subscription.as_deref() == Some(id.as_str()) => {
                crate::edge::backend::read_cache(config)
                    .borrow_mut()
                    .heard_head(chain, &header, now_ms());
            }
            _ => {}
        }
    }
}
