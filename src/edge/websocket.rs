//! A client's WebSocket (wasm32 only), held by the Worker (not a Durable Object: see the README's
//! "WebSocket" section and BENCHMARKS.md for why and what it costs while idle).
//!
//! Each message is answered in a task of its own ([`Relay::handle_message`]), so a send waiting
//! for its sender's turn does not hold up a read behind it. Subscriptions go over one upstream
//! WebSocket per connection, opened at the first `eth_subscribe`. When that socket drops while
//! subscriptions are held, the relay connects again (250 ms, doubling to 4 s, for
//! `WS_UPSTREAM_RECONNECT_MS`), makes every subscription again under the client's ids and sends
//! the `newHeads` missed meanwhile, fetched by number over HTTP; if the upstream does not come
//! back in time, the client's socket is closed with 1013 ([`Close::UpstreamLost`]).

use super::backend::WorkerBackend;
use super::platform::now_ms;
use super::upstream_socket::{Pending, UpstreamSocket};
use crate::chain_id::ChainIdCache;
use crate::config::Config;
use crate::jsonrpc::{self, Request, RpcError};
use crate::relay::socket::SubscriptionCalls;
use crate::relay::Relay;
use crate::upstream::Upstream;
use crate::websocket::subscriptions::{notification, Kind, Subscriptions};
use crate::websocket::{Close, SUBSCRIBE, UNSUBSCRIBE};
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{console_log, Delay, Env, Response, WebSocket, WebSocketPair, WebsocketEvent};

/// The upstream socket of a connection.
enum UpstreamState {
    /// None open: the next `eth_subscribe` connects.
    Down,
    /// Being connected (or reconnected): callers wait.
    Connecting,
    /// Open.
    Up(Rc<UpstreamSocket>),
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
    subscriptions: RefCell<Subscriptions>,
    upstream: RefCell<UpstreamState>,
    /// When the client last sent a message or was sent a notification, Unix ms.
    last_activity: Cell<u64>,
    messages: Cell<u64>,
    /// A limit broken while answering, to close with once the answer is out.
    close_after: RefCell<Option<Close>>,
    closed: Cell<bool>,
    opened_at: u64,
}

fn log(event: &str, request_id: &str, fields: &[(&str, Value)]) {
    let mut all = vec![("request_id", Value::from(request_id))];
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
) -> worker::Result<Response> {
    let pair = WebSocketPair::new()?;
    pair.server.accept()?;
    let now = now_ms();
    let connection = Rc::new(Connection {
        client: pair.server,
        env,
        config,
        chain_ids,
        request_id,
        client_ip,
        subscriptions: RefCell::new(Subscriptions::default()),
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
    /// Reads the client's messages until it closes or a limit closes it.
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
            let wait = limits.idle_timeout_ms - idle_ms;
            let next = pin!(events.next());
            let timer = pin!(Delay::from(Duration::from_millis(wait)));
            let event = match select(next, timer).await {
                Either::Left((event, _)) => event,
                Either::Right(_) => continue,
            };
            let message = match event {
                Some(Ok(WebsocketEvent::Message(message))) => message,
                Some(Ok(WebsocketEvent::Close(close))) => {
                    why = format!("client closed: {} {}", close.code(), close.reason());
                    // Completes the closing handshake (RFC 6455 section 5.5.1).
                    let _ = self.client.close(Some(1000), Some("closed by the client"));
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
            let n = self.messages.get() + 1;
            self.messages.set(n);
            spawn_local(self.clone().answer(body, n));
        }
        self.closed.set(true);
        if let UpstreamState::Up(socket) = self.upstream.replace(UpstreamState::Down) {
            let _ = socket
                .ws
                .close(Some(1000), Some("client connection closed"));
        }
        log(
            "ws_closed",
            &self.request_id,
            &[
                ("why", why.into()),
                ("messages", self.messages.get().into()),
                (
                    "duration_ms",
                    now_ms().saturating_sub(self.opened_at).into(),
                ),
            ],
        );
    }

    /// Answers one message and sends the answer; closes the socket after it when the message
    /// broke a limit.
    async fn answer(self: Rc<Self>, body: Vec<u8>, n: u64) {
        let request_id = format!("{}.{n}", self.request_id);
        let backend =
            WorkerBackend::new(&self.config, &self.env, &request_id, self.client_ip.clone());
        let relay = Relay::new(&self.config, &backend, &self.chain_ids);
        let answer = relay.handle_message(&body, &self).await;
        if let Some(text) = answer {
            self.send(&text);
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
            &[
                ("code", close.code().into()),
                ("reason", close.reason().into()),
            ],
        );
    }

    /// The open upstream socket, connecting when there is none; waits while one is being
    /// (re)connected, up to `UPSTREAM_TIMEOUT_MS`.
    async fn upstream(self: &Rc<Self>) -> Result<Rc<UpstreamSocket>, String> {
        let started = now_ms();
        loop {
            let connecting = match &*self.upstream.borrow() {
                UpstreamState::Up(socket) => return Ok(socket.clone()),
                UpstreamState::Connecting => true,
                UpstreamState::Down => false,
            };
            if !connecting {
                break;
            }
            if now_ms().saturating_sub(started) > self.config.upstream_timeout_ms {
                return Err("the upstream WebSocket is reconnecting".into());
            }
            Delay::from(Duration::from_millis(50)).await;
        }
        self.upstream.replace(UpstreamState::Connecting);
        match UpstreamSocket::connect(&self.config).await {
            Ok(socket) => self
                .opened(socket)
                .ok_or_else(|| "the connection closed".to_string()),
            Err(why) => {
                self.upstream.replace(UpstreamState::Down);
                Err(why)
            }
        }
    }

    /// A new upstream socket is open: keep it and read it. `None` (the socket closed at once)
    /// when the client's connection closed while it was being opened.
    fn opened(self: &Rc<Self>, socket: UpstreamSocket) -> Option<Rc<UpstreamSocket>> {
        if self.closed.get() {
            let _ = socket
                .ws
                .close(Some(1000), Some("client connection closed"));
            self.upstream.replace(UpstreamState::Down);
            return None;
        }
        let socket = Rc::new(socket);
        self.upstream.replace(UpstreamState::Up(socket.clone()));
        spawn_local(self.clone().read_upstream(socket.clone()));
        Some(socket)
    }

    /// Reads the upstream socket: answers to its requests, notifications to the client. When it
    /// drops, gets it back ([`Connection::resume`]).
    async fn read_upstream(self: Rc<Self>, socket: Rc<UpstreamSocket>) {
        let ws = socket.ws.clone();
        let why = match ws.events() {
            Err(e) => e.to_string(),
            Ok(mut events) => loop {
                match events.next().await {
                    Some(Ok(WebsocketEvent::Message(message))) => {
                        if let Some(text) = message.text() {
                            self.on_upstream_message(&socket, &text).await;
                        }
                    }
                    Some(Ok(WebsocketEvent::Close(close))) => {
                        break format!("closed: {} {}", close.code(), close.reason())
                    }
                    Some(Err(e)) => break e.to_string(),
                    None => break "closed".into(),
                }
            },
        };
        for pending in socket.abandon() {
            if let Pending::Subscribe { reply, .. } = pending {
                let _ = reply.send(Err(upstream_unavailable("the upstream WebSocket closed")));
            }
        }
        let current =
            matches!(&*self.upstream.borrow(), UpstreamState::Up(s) if Rc::ptr_eq(s, &socket));
        if !current || self.closed.get() {
            return;
        }
        self.upstream.replace(UpstreamState::Down);
        if self.subscriptions.borrow().is_empty() {
            return;
        }
        log(
            "ws_upstream_lost",
            &self.request_id,
            &[
                (
                    "upstream",
                    self.config.upstream_ws_name(socket.index).into(),
                ),
                ("why", self.config.redact(&why).into()),
                ("subscriptions", self.subscriptions.borrow().len().into()),
            ],
        );
        self.resume().await;
    }

    /// Connects again and makes every subscription again under the client's ids; closes the
    /// client's socket when the upstream is not back within `WS_UPSTREAM_RECONNECT_MS`.
    async fn resume(self: &Rc<Self>) {
        let lost = self.subscriptions.borrow_mut().lost();
        self.upstream.replace(UpstreamState::Connecting);
        let started = now_ms();
        let budget_ms = self.config.socket.upstream_reconnect_ms;
        let mut delay_ms = 250;
        let mut attempts = 0u32;
        loop {
            if self.closed.get() {
                self.upstream.replace(UpstreamState::Down);
                return;
            }
            attempts += 1;
            match UpstreamSocket::connect(&self.config).await {
                Ok(socket) => {
                    let Some(socket) = self.opened(socket) else {
                        return;
                    };
                    for (id, params) in &lost {
                        let _ = socket.request(
                            SUBSCRIBE,
                            params,
                            Pending::Resubscribe { id: id.clone() },
                        );
                    }
                    log(
                        "ws_upstream_resumed",
                        &self.request_id,
                        &[
                            (
                                "upstream",
                                self.config.upstream_ws_name(socket.index).into(),
                            ),
                            ("after_ms", now_ms().saturating_sub(started).into()),
                            ("attempts", attempts.into()),
                            ("subscriptions", lost.len().into()),
                        ],
                    );
                    return;
                }
                Err(why) => {
                    let elapsed_ms = now_ms().saturating_sub(started);
                    if elapsed_ms >= budget_ms {
                        self.upstream.replace(UpstreamState::Down);
                        log(
                            "ws_upstream_gone",
                            &self.request_id,
                            &[("why", why.into()), ("attempts", attempts.into())],
                        );
                        self.close(Close::UpstreamLost(budget_ms));
                        return;
                    }
                    let wait_ms = delay_ms.min(budget_ms - elapsed_ms);
                    Delay::from(Duration::from_millis(wait_ms)).await;
                    delay_ms = (delay_ms * 2).min(4_000);
                }
            }
        }
    }

    async fn on_upstream_message(self: &Rc<Self>, socket: &UpstreamSocket, text: &str) {
        let delivery = self.subscriptions.borrow_mut().deliver(text);
        if let Some(delivery) = delivery {
            if let Some(missed) = delivery.missed {
                for number in missed {
                    if let Some(header) = self.block(number).await {
                        self.send(&notification(&delivery.id, &header));
                    }
                }
            }
            self.last_activity.set(now_ms());
            self.send(&delivery.text);
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(text) else {
            return;
        };
        let Some((pending, answer)) = socket.answered(&message) else {
            return;
        };
        match (pending, answer) {
            (
                Pending::Subscribe {
                    kind,
                    params,
                    reply,
                },
                Ok(Value::String(upstream_id)),
            ) => {
                // Recorded here, before the next message is read, so that no notification of it
                // arrives unknown.
                let id = self
                    .subscriptions
                    .borrow_mut()
                    .add(kind, params, upstream_id);
                let _ = reply.send(Ok(id));
            }
            (Pending::Subscribe { reply, .. }, Ok(other)) => {
                let _ = reply.send(Err(RpcError::new(
                    jsonrpc::INTERNAL_ERROR,
                    format!("the upstream answered eth_subscribe with {other}"),
                )));
            }
            (Pending::Subscribe { reply, .. }, Err(mut error)) => {
                error.message = self.config.redact(&error.message);
                let _ = reply.send(Err(error));
            }
            (Pending::Resubscribe { id }, Ok(Value::String(upstream_id))) => {
                let kept = self
                    .subscriptions
                    .borrow_mut()
                    .resumed(&id, upstream_id.clone());
                if !kept {
                    let params = json!([upstream_id]).to_string();
                    let _ = socket.request(UNSUBSCRIBE, &params, Pending::Unsubscribe);
                }
            }
            (Pending::Resubscribe { id }, answer) => {
                log(
                    "ws_resubscribe_failed",
                    &self.request_id,
                    &[
                        ("subscription", id.into()),
                        ("answer", self.config.redact(&format!("{answer:?}")).into()),
                    ],
                );
                self.close(Close::UpstreamLost(
                    self.config.socket.upstream_reconnect_ms,
                ));
            }
            (Pending::Unsubscribe, _) => {}
        }
    }

    /// Block `number`'s header fields (`eth_getBlockByNumber(number, false)`'s result as JSON
    /// text) over HTTP, for a `newHeads` the client missed.
    async fn block(&self, number: u64) -> Option<String> {
        let request_id = format!("{}.heads", self.request_id);
        let backend =
            WorkerBackend::new(&self.config, &self.env, &request_id, self.client_ip.clone());
        let body = json!({"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber",
                          "params":[crate::hex::encode_quantity(number), false]})
        .to_string();
        let reply = backend
            .post(&body, self.config.upstream_timeout_ms)
            .await
            .ok()?;
        let answer: Value = serde_json::from_str(&reply.body).ok()?;
        answer
            .get("result")
            .filter(|r| r.is_object())
            .map(Value::to_string)
    }

    async fn subscribe(self: &Rc<Self>, req: &Request) -> Result<Value, RpcError> {
        let kind = Kind::of_params(&req.params)?;
        let limit = self.config.socket.max_subscriptions;
        if self.subscriptions.borrow().len() >= limit {
            let close = Close::TooManySubscriptions(limit);
            let error = close.error();
            self.close_after.replace(Some(close));
            return Err(error);
        }
        let socket = self
            .upstream()
            .await
            .map_err(|why| upstream_unavailable(&why))?;
        let (reply, answer) = oneshot::channel();
        let params = req.params.to_string();
        socket
            .request(
                SUBSCRIBE,
                &params,
                Pending::Subscribe {
                    kind,
                    params: params.clone(),
                    reply,
                },
            )
            .map_err(|why| upstream_unavailable(&self.config.redact(&why)))?;
        let timer = pin!(Delay::from(Duration::from_millis(
            self.config.upstream_timeout_ms
        )));
        match select(answer, timer).await {
            Either::Left((Ok(result), _)) => result.map(Value::String),
            Either::Left((Err(_), _)) => Err(upstream_unavailable("the upstream WebSocket closed")),
            Either::Right(_) => Err(upstream_unavailable(&format!(
                "no answer to eth_subscribe within {} ms",
                self.config.upstream_timeout_ms
            ))),
        }
    }

    fn unsubscribe(&self, req: &Request) -> Result<Value, RpcError> {
        let Some(id) = req.params.get(0).and_then(Value::as_str) else {
            return Err(RpcError::new(
                jsonrpc::INVALID_PARAMS,
                "invalid params: eth_unsubscribe takes [subscription id]",
            ));
        };
        let removed = self.subscriptions.borrow_mut().remove(id);
        if let Some(Some(upstream_id)) = &removed {
            if let UpstreamState::Up(socket) = &*self.upstream.borrow() {
                let params = json!([upstream_id]).to_string();
                let _ = socket.request(UNSUBSCRIBE, &params, Pending::Unsubscribe);
            }
        }
        Ok(Value::Bool(removed.is_some()))
    }
}

fn upstream_unavailable(why: &str) -> RpcError {
    RpcError::new(
        jsonrpc::RESOURCE_UNAVAILABLE,
        format!("the upstream WebSocket is unavailable: {why}"),
    )
}

/// The connection answers `eth_subscribe` and `eth_unsubscribe` itself.
impl SubscriptionCalls for Rc<Connection> {
    async fn call(&self, req: &Request) -> String {
        let id = req.response_id();
        let answer = match req.method.as_str() {
            SUBSCRIBE => self.subscribe(req).await,
            UNSUBSCRIBE => self.unsubscribe(req),
            other => Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                format!("method not allowed: {other}"),
            )),
        };
        match answer {
            Ok(result) => json!({"jsonrpc":"2.0","id":id,"result":result}).to_string(),
            Err(error) => error.response(&id),
        }
    }
}
