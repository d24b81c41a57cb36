//! The head watch's sockets ([`crate::cache::head_watch`]): a request whose reads went through
//! the cache opens its chain's watch when the isolate has none (or the live one nears its end),
//! and the Worker hands [`keep_alive`] to that request's `waitUntil`, which keeps the socket's
//! I/O alive after the response. Each `newHeads` header goes to the isolate's read cache
//! ([`crate::cache::ReadCache::heard_head`]); a watch that fails is logged
//! (`head_watch_failed`, with the chain) and the next waits [`head_watch::RETRY_MS`].

use crate::cache::head_watch::{self, HeadWatch, WatchMessage};
use crate::config::Config;
use crate::edge::runtime::now_ms;
use crate::edge::websocket::socket::UpstreamSocket;
use futures_channel::oneshot;
use futures_util::future::{join_all, select, Either};
use futures_util::StreamExt;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_log, Delay, WebsocketEvent};

thread_local! {
    /// Each chain's watches in this isolate.
    static WATCHES: RefCell<HashMap<u64, HeadWatch>> = RefCell::new(HashMap::new());
    /// The watches this request opened: each ends its receiver when it closes.
    static OPENED: RefCell<Vec<oneshot::Receiver<()>>> = const { RefCell::new(Vec::new()) };
}

/// Opens `config`'s chain's head watch when it is on (`CACHE` and `CACHE_HEAD_WATCH`) and the
/// isolate wants one ([`HeadWatch::want`]); the request must then hand [`keep_alive`] to
/// `waitUntil`.
pub fn open_if_wanted(config: &Config) {
    if !config.cache || !config.cache_head_watch || config.upstream_ws_urls.is_empty() {
        return;
    }
    let chain = config.cache_chain();
    let wanted_ms = now_ms();
    let Some(generation) =
        WATCHES.with(|w| w.borrow_mut().entry(chain).or_default().want(wanted_ms))
    else {
        return;
    };
    let (closed, on_close) = oneshot::channel::<()>();
    OPENED.with(|o| o.borrow_mut().push(on_close));
    let config = config.clone();
    spawn_local(async move {
        let outcome = watch(&config, chain, generation, wanted_ms).await;
        WATCHES.with(|w| {
            if let Some(watch) = w.borrow_mut().get_mut(&chain) {
                watch.ended(generation, now_ms(), outcome.is_err());
            }
        });
        if let Err(why) = outcome {
            let fields = [
                (
                    "chain",
                    crate::edge::runtime::chain_of(&config).map_or(Value::Null, Value::from),
                ),
                ("why", Value::from(config.redact(&why))),
                ("retry_ms", Value::from(head_watch::RETRY_MS)),
            ];
            console_log!("{}", crate::log::line("head_watch_failed", &fields));
        }
        drop(closed);
    });
}

/// What keeps the watches this request opened alive after its response: resolves when they have
/// all closed (at most [`head_watch::WATCH_MS`] after they opened). `None` when it opened none.
pub fn keep_alive() -> Option<impl Future<Output = ()> + 'static> {
    let opened = OPENED.with(|o| std::mem::take(&mut *o.borrow_mut()));
    if opened.is_empty() {
        return None;
    }
    Some(async move {
        join_all(opened).await;
    })
}

/// One watch, wanted at `wanted_ms`: connects to `config`'s first `UPSTREAM_WS_URL` that
/// accepts, subscribes to `newHeads`, and gives each header to the read cache until its time is
/// up ([`HeadWatch::live`]).
///
/// # Errors
/// Why it ended before its time: no socket, the subscription refused or unanswered within
/// `UPSTREAM_TIMEOUT_MS`, the socket closed or failed.
async fn watch(config: &Config, chain: u64, generation: u64, wanted_ms: u64) -> Result<(), String> {
    let socket = UpstreamSocket::connect(config).await?;
    let ws = socket.ws;
    let mut events = ws.events().map_err(|e| e.to_string())?;
    ws.send_with_str(head_watch::SUBSCRIBE)
        .map_err(|e| e.to_string())?;
    let asked = now_ms();
    let mut subscription: Option<String> = None;
    let mut until_ms = asked + config.upstream_timeout_ms.min(10_000);
    let outcome = loop {
        let now = now_ms();
        if now >= until_ms {
            break match subscription {
                Some(_) => Ok(()),
                None => Err("no answer to eth_subscribe newHeads".to_string()),
            };
        }
        let next = pin!(events.next());
        let timer = pin!(Delay::from(Duration::from_millis(until_ms - now)));
        let event = match select(next, timer).await {
            Either::Left((event, _)) => event,
            Either::Right(_) => continue,
        };
        let text = match event {
            Some(Ok(WebsocketEvent::Message(message))) => match message.text() {
                Some(text) => text,
                None => continue,
            },
            Some(Ok(WebsocketEvent::Close(close))) => {
                break Err(format!(
                    "closed by the upstream: {} {}",
                    close.code(),
                    close.reason()
                ))
            }
            Some(Err(e)) => break Err(format!("socket error: {e}")),
            None => break Err("closed by the upstream".to_string()),
        };
        match WatchMessage::read(&text) {
            WatchMessage::Subscribed(id) if subscription.is_none() => {
                subscription = Some(id);
                until_ms = WATCHES.with(|w| {
                    w.borrow_mut()
                        .entry(chain)
                        .or_default()
                        .live(generation, wanted_ms)
                });
            }
            WatchMessage::Refused(why) => break Err(format!("eth_subscribe newHeads: {why}")),
            WatchMessage::Head(id, header) if subscription.as_deref() == Some(id.as_str()) => {
                crate::edge::backend::read_cache(config)
                    .borrow_mut()
                    .heard_head(chain, &header, now_ms());
            }
            _ => {}
        }
    };
    let _ = ws.close(Some(1000), Some("head watch ends"));
    outcome
}
