//! A connection's upstream WebSocket: opened at the first subscription, read for answers and
//! notifications, and got back when it drops ([`Connection::resume`]). What a subscription missed
//! meanwhile is fetched over HTTP by tasks of their own ([`Connection::fill_heads`],
//! [`Connection::fill_logs`]), never inside the read loop.

use super::socket::{upstream_unavailable, Pending, UpstreamSocket, UpstreamState};
use super::{log, Connection};
use crate::edge::backend::WorkerBackend;
use crate::edge::runtime::now_ms;
use crate::jsonrpc::{self, Answer, RpcError};
use crate::platform::Platform;
use crate::upstream::route::Read;
use crate::upstream::Route;
use crate::websocket::{Close, SUBSCRIBE};
use futures_util::StreamExt;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::{Delay, WebsocketEvent};

/// How long one HTTP question about a gap may take, ms (at most `UPSTREAM_TIMEOUT_MS`): a
/// reconnect does not wait a minute for the head of a node that is down.
const GAP_QUESTION_MS: u64 = 5_000;
/// How many times the head is asked once the subscriptions are made again, 1 s apart, before a
/// logs gap is given up.
const HEAD_ATTEMPTS: u32 = 3;

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

    /// One message from the upstream socket, handled without waiting: a notification goes to
    /// the client (or is held while its subscription's missed heads are fetched), an answer
    /// settles what it was for.
    fn on_upstream_message(self: &Rc<Self>, socket: &UpstreamSocket, text: &str) {
        let delivery = self.subscriptions.borrow_mut().deliver(text);
        if let Some(delivery) = delivery {
            self.last_activity.set(now_ms());
            let out = {
                let subscriptions = self.subscriptions.borrow();
                self.backfill
                    .borrow_mut()
                    .deliver(delivery, subscriptions.memory())
            };
            for text in &out {
                self.send(text);
            }
            self.fill_heads();
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
                let kept = self
                    .subscriptions
                    .borrow_mut()
                    .resumed(&id, upstream_id.clone());
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

    /// Starts the fetch of the `newHeads` the subscriptions missed, when some wait and none runs.
    fn fill_heads(self: &Rc<Self>) {
        let Some(blocks) = self.backfill.borrow_mut().next_fetch() else {
            return;
        };
        let connection = self.clone();
        spawn_local(async move {
            let headers = connection.blocks(blocks.clone()).await;
            let fetched = headers.len();
            let out = {
                let subscriptions = connection.subscriptions.borrow();
                connection.backfill.borrow_mut().fetched(
                    blocks.clone(),
                    &headers,
                    subscriptions.memory(),
                )
            };
            for text in &out {
                connection.send(text);
            }
            log(
                "ws_heads_gap",
                &connection.request_id,
                &[
                    ("from_block", (*blocks.start()).into()),
                    ("to_block", (*blocks.end()).into()),
                    ("fetched", fetched.into()),
                    ("sent", out.len().into()),
                ],
            );
            connection.fill_heads();
        });
    }

    /// The `result`s of `requests` ((method, params JSON text)) over HTTP (`UPSTREAM_RPC_URL`),
    /// asked as one JSON-RPC batch within [`GAP_QUESTION_MS`], in order; `None` for a member
    /// without a usable result. All `None` when the batch got no usable answer.
    async fn ask_all(&self, requests: &[(&str, String)]) -> Vec<Option<Value>> {
        let mut answers = vec![None; requests.len()];
        if requests.is_empty() {
            return answers;
        }
        let request_id = format!("{}.gap", self.request_id);
        let backend =
            WorkerBackend::new(&self.config, &self.env, &request_id, self.client_ip.clone());
        let members: Vec<String> = requests
            .iter()
            .enumerate()
            .map(|(i, (method, params))| {
                format!(r#"{{"jsonrpc":"2.0","id":{i},"method":"{method}","params":{params}}}"#)
            })
            .collect();
        let body = format!("[{}]", members.join(","));
        let timeout_ms = self.config.upstream_timeout_ms.min(GAP_QUESTION_MS);
        let route = Route::Read(Read::Idempotent);
        let Ok(reply) = backend.post(&body, route, timeout_ms).await else {
            return answers;
        };
        let Ok(Value::Array(responses)) = serde_json::from_str::<Value>(&reply.body) else {
            return answers;
        };
        for mut response in responses {
            let index = response.get("id").and_then(Value::as_u64);
            let result = response.get_mut("result").map(Value::take);
            if let (Some(i), Some(result)) = (index, result.filter(|r| !r.is_null())) {
                if let Some(slot) = answers.get_mut(i as usize) {
                    *slot = Some(result);
                }
            }
        }
        answers
    }

    /// The upstream's head block number over HTTP.
    pub(super) async fn head(&self) -> Option<u64> {
        let result = self
            .ask_all(&[("eth_blockNumber", "[]".into())])
            .await
            .pop()??;
        crate::hex::decode_quantity(result.as_str()?).ok()
    }

    /// The headers of `blocks` (`eth_getBlockByNumber(n, false)`'s result as JSON text, by
    /// number), in one batch; those without an answer are left out.
    async fn blocks(&self, blocks: RangeInclusive<u64>) -> HashMap<u64, String> {
        let numbers: Vec<u64> = blocks.collect();
        let requests: Vec<(&str, String)> = numbers
            .iter()
            .map(|&n| {
                let params = json!([crate::hex::encode_quantity(n), false]).to_string();
                ("eth_getBlockByNumber", params)
            })
            .collect();
        let answers = self.ask_all(&requests).await;
        numbers
            .into_iter()
            .zip(answers)
            .filter_map(|(n, block)| Some((n, block.filter(Value::is_object)?.to_string())))
            .collect()
    }

    /// Sends the logs the `logs` subscriptions missed while the upstream socket was away: the
    /// upstream's head is asked (up to [`HEAD_ATTEMPTS`] times, 1 s apart; without it the gaps
    /// are given up), then every subscription's logs of its gap in one batch of `eth_getLogs`
    /// (logged as `ws_logs_gap`).
    async fn fill_logs(self: Rc<Self>) {
        let ids = self.subscriptions.borrow().gaps();
        let mut to = None;
        for attempt in 1..=HEAD_ATTEMPTS {
            to = self.head().await;
            if to.is_some() || attempt == HEAD_ATTEMPTS || self.closed.get() {
                break;
            }
            Delay::from(Duration::from_millis(1_000)).await;
        }
        let Some(to) = to else {
            for id in &ids {
                self.subscriptions.borrow_mut().drop_gap(id);
            }
            log(
                "ws_logs_gap",
                &self.request_id,
                &[
                    ("fetched", false.into()),
                    ("why", "the upstream's head could not be learned".into()),
                    ("subscriptions", ids.len().into()),
                ],
            );
            return;
        };
        let queries: Vec<(String, String)> = ids
            .iter()
            .filter_map(|id| {
                let query = self.subscriptions.borrow_mut().gap_query(id, to)?;
                Some((id.clone(), query))
            })
            .collect();
        let requests: Vec<(&str, String)> = queries
            .iter()
            .map(|(_, query)| ("eth_getLogs", query.clone()))
            .collect();
        let found = self.ask_all(&requests).await;
        let mut sent = 0;
        for ((id, _), logs) in queries.iter().zip(&found) {
            let texts = match logs {
                Some(logs) => self.subscriptions.borrow_mut().gap_logs(id, logs),
                None => {
                    self.subscriptions.borrow_mut().drop_gap(id);
                    Vec::new()
                }
            };
            for text in &texts {
                self.send(text);
            }
            sent += texts.len();
        }
        log(
            "ws_logs_gap",
            &self.request_id,
            &[
                ("to_block", to.into()),
                ("fetched", found.iter().any(Option::is_some).into()),
                ("subscriptions", queries.len().into()),
                ("sent", sent.into()),
            ],
        );
    }
}
