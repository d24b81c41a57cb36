//! A connection's upstream WebSocket: opened at the first subscription, read for answers and
//! notifications, and got back when it drops ([`Connection::resume`]). What a subscription missed
//! meanwhile is fetched over HTTP by tasks of their own (in `gaps.rs`), never inside the read
//! loop.

use super::socket::{upstream_unavailable, Pending, UpstreamSocket, UpstreamState};
use super::{log, Connection};
use crate::edge::runtime::now_ms;
use crate::jsonrpc::{self, Answer, RpcError};
use crate::websocket::params::Subscribe;
use crate::websocket::subscriptions::Delivery;
use crate::websocket::{Close, SUBSCRIBE};
use futures_channel::oneshot;
use futures_util::StreamExt;
use serde_json::json;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Delay, WebsocketEvent};

impl Connection {
    /// The open upstream socket, connecting when there is none; waits while one is being
    /// (re)connected, up to `UPSTREAM_TIMEOUT_MS`.
    pub(super) async fn upstream(self: &Rc<Self>) -> Result<Rc<UpstreamSocket>, String> {
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
    /// when the client's connection closed while it was being opened. One the connection held
    /// before is closed: a connection never has two.
    fn opened(self: &Rc<Self>, socket: UpstreamSocket) -> Option<Rc<UpstreamSocket>> {
        if self.closed.get() {
            socket.close();
            self.upstream.replace(UpstreamState::Down);
            return None;
        }
        let socket = Rc::new(socket);
        if let UpstreamState::Up(old) = self.upstream.replace(UpstreamState::Up(socket.clone())) {
            if !Rc::ptr_eq(&old, &socket) {
                old.close();
            }
        }
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
                            self.on_upstream_message(&socket, &text);
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
            if let Pending::Subscribe { subscribe, reply } = pending {
                self.subscriptions.borrow_mut().abandon(&subscribe);
                let _ = reply.send(upstream_unavailable("the upstream WebSocket closed"));
            }
        }
        let current =
            matches!(&*self.upstream.borrow(), UpstreamState::Up(s) if Rc::ptr_eq(s, &socket));
        if !current || self.closed.get() {
            return;
        }
        if self.subscriptions.borrow().is_empty() {
            self.upstream.replace(UpstreamState::Down);
            return;
        }
        // At once, before any await: a subscribe meanwhile waits for the resume instead of
        // opening a second socket that the resume would orphan.
        self.upstream.replace(UpstreamState::Connecting);
        log(
            "ws_upstream_lost",
            &self.request_id,
            &self.config,
            &[
                (
                    "upstream",
                    self.config.upstream_ws_name(socket.index).into(),
                ),
                ("why", self.config.redact(&why).into()),
                ("subscriptions", self.subscriptions.borrow().len().into()),
            ],
        );
        // The block the upstream had reached, for the logs of the gap (one read over HTTP).
        let has_logs = self.subscriptions.borrow().has_logs();
        let head = if has_logs { self.head().await } else { None };
        self.resume(head).await;
    }

    /// Connects again and makes every subscription again under the client's ids; closes the
    /// client's socket when the upstream is not back within `WS_UPSTREAM_RECONNECT_MS`.
    async fn resume(self: &Rc<Self>, head: Option<u64>) {
        let lost = self.subscriptions.borrow_mut().lost(head);
        self.backfill.borrow_mut().resumed();
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
                    self.resubscribing.set(lost.len());
                    for (id, params) in &lost {
                        let pending = Pending::Resubscribe { id: id.clone() };
                        if socket.request(SUBSCRIBE, params, pending).is_err() {
                            self.resubscribing.set(self.resubscribing.get() - 1);
                        }
                    }
                    log(
                        "ws_upstream_resumed",
                        &self.request_id,
                        &self.config,
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
                            &self.config,
                            &[("why", why.into()), ("attempts", attempts.into())],
                        );
                        self.close(Close::UpstreamLost(budget_ms));
                        return;
                    }
                    let wait_ms = delay_ms.min(budget_ms - elapsed_ms);
                    Delay::from(Duration::from_millis(wait_ms)).await;
                    delay_ms = (delay_ms * 2).min(2_000);
                }
            }
        }
    }

    /// One message from the upstream socket, handled without waiting: a notification goes to
    /// the client (or is held while its subscription's missed heads are fetched), an answer
    /// settles what it was for.
    fn on_upstream_message(self: &Rc<Self>, socket: &UpstreamSocket, text: &str) {
        let delivery = self.subscriptions.borrow_mut().deliver(text);
        if let Some(delivery) = delivery {
            self.notify(delivery);
            return;
        }
        let Some((pending, answer)) = socket.answered(text) else {
            return;
        };
        let upstream_id = match &answer {
            Answer::Result(raw) => serde_json::from_str::<String>(raw).ok(),
            Answer::Error(_) => None,
        };
        match (pending, upstream_id) {
            (Pending::Subscribe { subscribe, reply }, Some(upstream_id)) => {
                self.subscribed(socket, subscribe, reply, upstream_id);
            }
            (Pending::Subscribe { subscribe, reply }, None) => {
                self.subscriptions.borrow_mut().abandon(&subscribe);
                let _ = reply.send(match answer {
                    Answer::Error(raw) => Answer::Error(self.config.redact(&raw)),
                    Answer::Result(raw) => Answer::error(&RpcError::new(
                        jsonrpc::INTERNAL_ERROR,
                        format!("the upstream answered eth_subscribe with {raw}"),
                    )),
                });
            }
            (Pending::Resubscribe { id }, Some(upstream_id)) => {
                self.resubscribed(socket, &id, upstream_id);
            }
            (Pending::Resubscribe { id }, None) => {
                log(
                    "ws_resubscribe_failed",
                    &self.request_id,
                    &self.config,
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

    /// A notification of one of the connection's subscriptions (`delivery`, already under the
    /// client's id): the connection is active; a `newHeads` header moves the read cache's head
    /// (when `CACHE` is on); the notification goes to the client, or is held behind its
    /// subscription's missed heads, whose fetch starts when none runs ([`Connection::fill_heads`]).
    fn notify(self: &Rc<Self>, delivery: Delivery) {
        self.last_activity.set(now_ms());
        // The head the upstream announced moves the read cache's, or makes it asked.
        if let Some(head) = delivery.head.as_ref().filter(|_| self.config.cache) {
            crate::edge::runtime::read_cache(&self.config)
                .borrow_mut()
                .heard_head(self.config.chain_key(), head, now_ms());
        }
        let out = {
            let subscriptions = self.subscriptions.borrow();
            self.backfill
                .borrow_mut()
                .deliver(delivery, subscriptions.memory())
        };
        for text in &out {
            self.send_notification(text);
        }
        self.fill_heads();
    }

    /// The upstream made a client's `eth_subscribe` (`subscribe`), as `upstream_id`: the
    /// subscription is kept and its client id sent on `reply`; when the client's call gave up
    /// waiting, it goes again (removed, and unsubscribed at the upstream over `socket`).
    fn subscribed(
        &self,
        socket: &UpstreamSocket,
        subscribe: Subscribe,
        reply: oneshot::Sender<Answer>,
        upstream_id: String,
    ) {
        // Recorded here, before the next message is read, so that no notification of it
        // arrives unknown.
        let id = self
            .subscriptions
            .borrow_mut()
            .add(subscribe, upstream_id.clone());
        if reply.send(Answer::Result(json!(id).to_string())).is_err() {
            // The client's call gave up waiting (UPSTREAM_TIMEOUT_MS): it never got the
            // id, so the subscription goes.
            self.subscriptions.borrow_mut().remove(&id);
            socket.unsubscribe(&upstream_id);
        }
    }

    /// The upstream made the client's subscription `id` again after a reconnect, as
    /// `upstream_id` (unsubscribed at once over `socket` when the client unsubscribed
    /// meanwhile); once the last one is made again, the logs the subscriptions missed are
    /// fetched in a task of its own ([`Connection::fill_logs`]).
    fn resubscribed(self: &Rc<Self>, socket: &UpstreamSocket, id: &str, upstream_id: String) {
        let kept = self
            .subscriptions
            .borrow_mut()
            .resumed(id, upstream_id.clone());
        if !kept {
            socket.unsubscribe(&upstream_id);
        }
        let left = self.resubscribing.get().saturating_sub(1);
        self.resubscribing.set(left);
        if left == 0 && !self.subscriptions.borrow().gaps().is_empty() {
            // Every subscription is made again: what they missed is all in blocks up
            // to the head now.
            spawn_local(self.clone().fill_logs());
        }
    }
}
