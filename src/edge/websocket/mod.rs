//! A client's WebSocket (wasm32 only), held by the Worker (not a Durable Object: see
//! docs/design.md's "WebSocket" section and BENCHMARKS.md for why and what it costs while idle).
//!
//! Each message is answered in a task of its own ([`Relay::handle_message`]), so a send waiting
//! for its sender's turn does not hold up a read behind it; its body is charged to the
//! connection's memory while it is answered (over `WS_MAX_CONNECTION_BYTES` or
//! `WS_MAX_ISOLATE_BYTES`: -32005 with id null, the socket stays). Subscriptions go over one
//! upstream WebSocket per connection, opened at the first `eth_subscribe`. When that socket drops
//! while subscriptions are held, the relay connects again (250 ms, doubling to 2 s, for
//! `WS_UPSTREAM_RECONNECT_MS`), makes every subscription again under the client's ids and sends
//! the `newHeads` and the logs missed meanwhile, fetched over HTTP by tasks of their own, one
//! batch for all of the connection's subscriptions ([`crate::websocket::backfill`]); if the
//! upstream does not come back in time, the client's socket is closed with 1013
//! ([`Close::UpstreamLost`]).

mod gaps;
mod reader;
pub(crate) mod socket;
mod subscribe;

use super::backend::WorkerBackend;
use super::runtime::now_ms;
use crate::chain_id::ChainIdCache;
use crate::config::Config;
use crate::jsonrpc::{RpcError, LIMIT_EXCEEDED};
use crate::relay::Relay;
use crate::websocket::backfill::Backfill;
use crate::websocket::memory::{Budget, Memory};
use crate::websocket::subscriptions::Subscriptions;
use crate::websocket::Close;
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use serde_json::Value;
use socket::UpstreamState;
use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_log, Delay, Env, Response, WebSocket, WebSocketPair, WebsocketEvent};

thread_local! {
    /// What all of this isolate's connections keep (`WS_MAX_ISOLATE_BYTES`), made by the first.
    static ISOLATE_MEMORY: std::cell::OnceCell<Rc<Budget>> = const { std::cell::OnceCell::new() };
}

/// The isolate's memory budget for WebSocket connections.
fn isolate_memory(config: &Config) -> Rc<Budget> {
    ISOLATE_MEMORY.with(|cell| {
        cell.get_or_init(|| Rc::new(Budget::new(config.socket.max_isolate_bytes)))
            .clone()
    })
}

/// One client connection.
struct Connection {
    client: WebSocket,
    env: Env,
    config: Rc<Config>,
    chain_ids: Rc<ChainIdCache>,
    /// The upgrade request's `X-Request-Id`; each message's work is logged as `{id}.{n}`.
    request_id: String,
    client_ip: String,
    /// The opt-in to the public mempool of the URL it connected to (`?public_after_blocks=N`),
    /// for its private sends.
    opt_in: Option<u64>,
    /// Its API key, admitted at the upgrade: each message spends its budget, and so does each
    /// notification, counted at each lease's end ([`Connection::check_key`]); a refusal at a
    /// lease closes the socket (1008), messages or none.
    access: crate::edge::keys::Access,
    /// Notifications sent since the key's last check ([`Connection::send_notification`]).
    notified: Cell<u64>,
    /// Its subscriptions, and its memory (`WS_MAX_CONNECTION_BYTES`).
    subscriptions: RefCell<Subscriptions>,
    /// The missed `newHeads` being filled in.
    backfill: RefCell<Backfill>,
    /// Subscriptions made again on a new upstream socket and not confirmed yet: when the last
    /// is, the logs of the gap are fetched.
    resubscribing: Cell<usize>,
    upstream: RefCell<UpstreamState>,
    /// When the client last sent a message or was sent a notification, Unix ms.
    last_activity: Cell<u64>,
    messages: Cell<u64>,
    /// A limit broken while answering, to close with once the answer is out.
    close_after: RefCell<Option<Close>>,
    closed: Cell<bool>,
    opened_at: u64,
}

/// The most notification units one spend takes at a key's check: a lease grows with what the
/// last one served, and a small step keeps a listener's spend within what a lease may grant.
const NOTIFICATIONS_PER_SPEND: u64 = 10;

/// Logs a WebSocket connection's `event` with its request id and its chain's id (`chain`).
fn log(event: &str, request_id: &str, config: &Config, fields: &[(&str, Value)]) {
    let mut all = vec![("request_id", Value::from(request_id))];
    if let Some(chain) = crate::edge::runtime::chain_of(config) {
        all.push(("chain", chain.into()));
    }
    all.extend(fields.iter().cloned());
    console_log!("{}", crate::log::line(event, &all));
}

/// Accepts a WebSocket upgrade (`GET /` with `Upgrade: websocket`): returns the 101 answer and
/// serves the connection in the background until either side closes it.
///
/// # Errors
/// The runtime's, when the socket pair can't be made.
pub fn upgrade(
    env: Env,
    config: Rc<Config>,
    chain_ids: Rc<ChainIdCache>,
    request_id: String,
    client_ip: String,
    opt_in: Option<u64>,
    access: crate::edge::keys::Access,
) -> worker::Result<Response> {
    let pair = WebSocketPair::new()?;
    pair.server.accept()?;
    let now = now_ms();
    let memory = Memory::new(config.socket.max_connection_bytes, isolate_memory(&config));
    let connection = Rc::new(Connection {
        client: pair.server,
        env,
        config,
        chain_ids,
        request_id,
        client_ip,
        opt_in,
        access,
        notified: Cell::new(0),
        subscriptions: RefCell::new(Subscriptions::new(memory)),
        backfill: RefCell::new(Backfill::default()),
        resubscribing: Cell::new(0),
        upstream: RefCell::new(UpstreamState::Down),
        last_activity: Cell::new(now),
        messages: Cell::new(0),
        close_after: RefCell::new(None),
        closed: Cell::new(false),
        opened_at: now,
    });
    spawn_local(connection.serve());
    Response::from_websocket(pair.client)
}

impl Connection {
    async fn serve(self: Rc<Self>) {
        let Ok(mut events) = self.client.events() else {
            return;
        };
        let limits = self.config.socket;
        let mut why = String::from("client closed");
        loop {
            if self.closed.get() {
                why = "closed by the relay".into();
                break;
            }
            let idle_ms = now_ms().saturating_sub(self.last_activity.get());
            if idle_ms >= limits.idle_timeout_ms {
                self.close(Close::Idle(limits.idle_timeout_ms / 1_000));
                why = "idle".into();
                break;
            }
            if self.key_check_in() == Some(0) {
                if let Some(refusal) = self.check_key().await {
                    let error = refusal.error();
                    self.close(Close::KeyRefused {
                        code: error.code,
                        message: error.message,
                    });
                    why = "API key refused at its lease".into();
                    break;
                }
                continue;
            }
            let wait =
                (limits.idle_timeout_ms - idle_ms).min(self.key_check_in().unwrap_or(u64::MAX));
            let next = pin!(events.next());
            let timer = pin!(Delay::from(Duration::from_millis(wait)));
            let event = match select(next, timer).await {
                Either::Left((event, _)) => event,
                Either::Right(_) => continue,
            };
            let message = match event {
                Some(Ok(WebsocketEvent::Message(message))) => message,
                Some(Ok(WebsocketEvent::Close(close))) => {
                    if self.closed.get() {
                        why = "closed by the relay".into(); // the client's answer to our close
                    } else {
                        why = format!("client closed: {} {}", close.code(), close.reason());
                        // Completes the closing handshake (RFC 6455 section 5.5.1).
                        let _ = self.client.close(Some(1000), Some("closed by the client"));
                    }
                    break;
                }
                Some(Err(e)) => {
                    why = format!("client socket error: {e}");
                    break;
                }
                None => break,
            };
            self.last_activity.set(now_ms());
            let body = message
                .text()
                .map(String::into_bytes)
                .or_else(|| message.bytes())
                .unwrap_or_default();
            if body.len() > limits.max_message_bytes {
                self.close(Close::TooBig(limits.max_message_bytes));
                why = "message too big".into();
                break;
            }
            self.charge_and_answer(body);
        }
        self.ended(why);
    }

    /// With a key, how long until its next check, ms (0: due): the end of the isolate's lease
    /// of it, when the key's object is asked again (a revoked key is refused then); due now when
    /// no lease is held. `None` without a key.
    fn key_check_in(&self) -> Option<u64> {
        let hash = self.access.hash()?;
        let ends = crate::edge::keys::lease_ends(hash).unwrap_or(0);
        Some(ends.saturating_sub(now_ms()))
    }

    /// The key's check at a lease's end: the notifications sent since the last one spend its
    /// budget (a unit each, [`NOTIFICATIONS_PER_SPEND`] at a time), and a lease that ended is
    /// renewed, so a socket that only listens learns that its key was revoked or its budget
    /// spent within a lease's life ([`crate::access::keys::budget::LEASE_MS`]). The key's
    /// usage is a `key_usage` line (reads: the notifications). Returns the refusal.
    async fn check_key(&self) -> Option<crate::access::keys::Refusal> {
        let hash = self.access.hash()?;
        let notified = self.notified.replace(0);
        let mut left = notified;
        let mut refused = None;
        loop {
            let units = left.min(NOTIFICATIONS_PER_SPEND);
            if let Err(refusal) = crate::edge::keys::spend(&self.env, hash, 0, units).await {
                refused = Some(refusal);
                break;
            }
            left -= units;
            if left == 0 {
                break;
            }
        }
        if notified > 0 || refused.is_some() {
            let metric = crate::edge::keys::usage_metric(hash, 0, notified, refused.as_ref())
                .field("via", "ws_notifications");
            let chain = crate::edge::runtime::chain_of(&self.config);
            crate::edge::runtime::emit(&self.env, chain, &metric, Some(&self.request_id));
        }
        refused
    }

    /// Sends a subscription's notification (counted for the key's check).
    fn send_notification(&self, text: &str) {
        self.notified.set(self.notified.get() + 1);
        self.send(text);
    }

    /// One message from the client, `body` (its text's UTF-8 bytes, or its binary data), numbered
    /// and charged to the connection's memory, then answered in a task of its own
    /// ([`Connection::answer`]); over `WS_MAX_CONNECTION_BYTES` or `WS_MAX_ISOLATE_BYTES`, refused
    /// instead: -32005 with id null, and the socket stays.
    fn charge_and_answer(self: &Rc<Self>, body: Vec<u8>) {
        let n = self.messages.get() + 1;
        self.messages.set(n);
        if !self.subscriptions.borrow().memory().take(body.len()) {
            let error = RpcError::new(
                LIMIT_EXCEEDED,
                "message refused: the connection's messages in flight use all the memory the relay allows (WS_MAX_CONNECTION_BYTES, WS_MAX_ISOLATE_BYTES); retry when they are answered",
            );
            self.send(&error.response(&crate::jsonrpc::Id::null()));
            return;
        }
        spawn_local(self.clone().answer(body, n));
    }

    /// The connection is over (`why`, for the log): it is closed, its upstream socket too, what
    /// it kept (subscriptions, memory, missed heads) goes back to the isolate, and `ws_closed` is
    /// logged with its messages, its duration (ms) and the isolate's wasm memory (bytes).
    fn ended(&self, why: String) {
        self.closed.set(true);
        if let UpstreamState::Up(socket) = self.upstream.replace(UpstreamState::Down) {
            socket.close();
        }
        // What the connection kept goes back to the isolate now, not when its last task ends.
        let released = Subscriptions::new(Memory::new(0, isolate_memory(&self.config)));
        drop(self.subscriptions.replace(released));
        self.backfill.replace(Backfill::default());
        log(
            "ws_closed",
            &self.request_id,
            &self.config,
            &[
                ("why", why.into()),
                ("messages", self.messages.get().into()),
                (
                    "duration_ms",
                    now_ms().saturating_sub(self.opened_at).into(),
                ),
                // The isolate's wasm memory (it only grows), for what connections cost.
                (
                    "wasm_memory_bytes",
                    (core::arch::wasm32::memory_size(0) as u64 * 65_536).into(),
                ),
            ],
        );
    }

    /// Answers one message and sends the answer; closes the socket after it when the message
    /// broke a limit.
    async fn answer(self: Rc<Self>, body: Vec<u8>, n: u64) {
        let request_id = format!("{}.{n}", self.request_id);
        let backend =
            WorkerBackend::new(&self.config, &self.env, &request_id, self.client_ip.clone())
                .with_key(self.access.admitted.as_ref());
        let relay = Relay::new(&self.config, &backend, &self.chain_ids).with_opt_in(self.opt_in);
        let answer = self.access.on(relay).handle_message(&body, &self).await;
        // The key refused at its lease (revoked, its budget spent): the socket closes, 1008.
        let refused = backend.key_refused.borrow_mut().take();
        if let Some(refusal) = refused {
            let error = refusal.error();
            self.close_after.replace(Some(Close::KeyRefused {
                code: error.code,
                message: error.message,
            }));
        }
        self.subscriptions.borrow().memory().give(body.len());
        drop(body);
        if let Some(body) = answer {
            self.send(&body.render());
        }
        let close = self.close_after.borrow_mut().take();
        if let Some(close) = close {
            self.close(close);
        }
    }

    fn send(&self, text: &str) {
        if !self.closed.get() {
            let _ = self.client.send_with_str(text);
        }
    }

    /// Sends `close`'s error, then closes the client's socket with its code and reason.
    fn close(&self, close: Close) {
        if self.closed.replace(true) {
            return;
        }
        let _ = self.client.send_with_str(close.message());
        let _ = self.client.close(Some(close.code()), Some(close.reason()));
        log(
            "ws_close",
            &self.request_id,
            &self.config,
            &[
                ("code", close.code().into()),
                ("reason", close.reason().into()),
            ],
        );
    }
}
