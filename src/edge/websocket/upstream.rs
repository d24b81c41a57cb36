//! A connection's upstream WebSocket: opened at the first subscription, read for answers and
//! notifications, and got back when it drops ([`Connection::resume`]).

use super::socket::{upstream_unavailable, Pending, UpstreamSocket, UpstreamState};
use super::{log, Connection};
use crate::edge::backend::WorkerBackend;
use crate::edge::platform::now_ms;
use crate::jsonrpc::{self, Answer, RpcError};
use crate::upstream::Upstream;
use crate::websocket::subscriptions::notification;
use crate::websocket::{Close, SUBSCRIBE};
use futures_util::StreamExt;
use serde_json::{json, Value};
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
    /// when the client's connection closed while it was being opened.
    fn opened(self: &Rc<Self>, socket: UpstreamSocket) -> Option<Rc<UpstreamSocket>> {
        if self.closed.get() {
            socket.close();
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
                let _ = reply.send(upstream_unavailable("the upstream WebSocket closed"));
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
        // The block the upstream had reached, for the logs of the gap (one read over HTTP).
        let has_logs = self.subscriptions.borrow().has_logs();
        let head = if has_logs { self.head().await } else { None };
        self.resume(head).await;
    }

    /// Connects again and makes every subscription again under the client's ids; closes the
    /// client's socket when the upstream is not back within `WS_UPSTREAM_RECONNECT_MS`.
    async fn resume(self: &Rc<Self>, head: Option<u64>) {
        let lost = self.subscriptions.borrow_mut().lost(head);
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
                    delay_ms = (delay_ms * 2).min(2_000);
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
        let Some((pending, answer)) = socket.answered(text) else {
            return;
        };
        let upstream_id = match &answer {
            Answer::Result(raw) => serde_json::from_str::<String>(raw).ok(),
            Answer::Error(_) => None,
        };
        match (pending, upstream_id) {
            (
                Pending::Subscribe {
                    kind,
                    params,
                    reply,
                },
                Some(upstream_id),
            ) => {
                // Recorded here, before the next message is read, so that no notification of it
                // arrives unknown.
                let id = self
                    .subscriptions
                    .borrow_mut()
                    .add(kind, params, upstream_id.clone());
                if reply.send(Answer::Result(json!(id).to_string())).is_err() {
                    // The client's call gave up waiting (UPSTREAM_TIMEOUT_MS): it never got the
                    // id, so the subscription goes.
                    self.subscriptions.borrow_mut().remove(&id);
                    socket.unsubscribe(&upstream_id);
                }
            }
            (Pending::Subscribe { reply, .. }, None) => {
                let _ = reply.send(match answer {
                    Answer::Error(raw) => Answer::Error(self.config.redact(&raw)),
                    Answer::Result(raw) => Answer::error(&RpcError::new(
                        jsonrpc::INTERNAL_ERROR,
                        format!("the upstream answered eth_subscribe with {raw}"),
                    )),
                });
            }
            (Pending::Resubscribe { id }, Some(upstream_id)) => {
                let kept = self
                    .subscriptions
                    .borrow_mut()
                    .resumed(&id, upstream_id.clone());
                if !kept {
                    socket.unsubscribe(&upstream_id);
                } else if self.subscriptions.borrow().has_gap(&id) {
                    // Made again upstream: what it missed is now all in blocks up to the head.
                    self.fill_logs_gap(&id).await;
                }
            }
            (Pending::Resubscribe { id }, None) => {
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

    /// The `result` of `method` with `params` (JSON text) over HTTP (`UPSTREAM_RPC_URL`), for
    /// what a subscription missed; `None` when there is no usable answer.
    async fn ask(&self, method: &str, params: &str) -> Option<Value> {
        let request_id = format!("{}.gap", self.request_id);
        let backend =
            WorkerBackend::new(&self.config, &self.env, &request_id, self.client_ip.clone());
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}"#);
        let reply = backend
            .post(&body, self.config.upstream_timeout_ms)
            .await
            .ok()?;
        let mut answer: Value = serde_json::from_str(&reply.body).ok()?;
        Some(answer.get_mut("result")?.take()).filter(|r| !r.is_null())
    }

    /// The upstream's head block number over HTTP.
    pub(super) async fn head(&self) -> Option<u64> {
        let result = self.ask("eth_blockNumber", "[]").await?;
        crate::hex::decode_quantity(result.as_str()?).ok()
    }

    /// Block `number`'s header fields (`eth_getBlockByNumber(number, false)`'s result as JSON
    /// text), for a `newHeads` the client missed.
    async fn block(&self, number: u64) -> Option<String> {
        let params = json!([crate::hex::encode_quantity(number), false]).to_string();
        let block = self.ask("eth_getBlockByNumber", &params).await?;
        block.is_object().then(|| block.to_string())
    }

    /// Sends the logs subscription `id` missed while the upstream socket was away, fetched with
    /// `eth_getLogs` up to the upstream's head now (logged as `ws_logs_gap`).
    async fn fill_logs_gap(&self, id: &str) {
        let Some(to) = self.head().await else {
            return;
        };
        let Some(query) = self.subscriptions.borrow_mut().gap_query(id, to) else {
            return;
        };
        let found = self.ask("eth_getLogs", &query).await;
        let sent = match &found {
            Some(logs) => self.subscriptions.borrow_mut().gap_logs(id, logs),
            None => Vec::new(),
        };
        for text in &sent {
            self.send(text);
        }
        log(
            "ws_logs_gap",
            &self.request_id,
            &[
                ("to_block", to.into()),
                ("fetched", found.is_some().into()),
                ("sent", sent.len().into()),
            ],
        );
    }
}
