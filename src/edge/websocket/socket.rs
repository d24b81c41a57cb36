//! The upstream's WebSocket for one client connection: connecting to
//! `UPSTREAM_WS_URL` (each URL in turn), requests matched to their answers by id. The client
//! connection ([`super`]) reads its events and decides what a lost socket means.

use crate::config::Config;
use crate::jsonrpc::{Answer, RpcError};
use crate::websocket::params::Subscribe;
use crate::websocket::UNSUBSCRIBE;
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde::Deserialize;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::{Delay, Url, WebSocket};

/// What an answer from the upstream socket is for.
pub enum Pending {
    /// A client's `eth_subscribe` (checked, counted and charged when it was asked): the
    /// answer's result is the upstream's id; `reply` gets the client's answer (its id, or the
    /// upstream's error).
    Subscribe {
        subscribe: Subscribe,
        reply: oneshot::Sender<Answer>,
    },
    /// The client's subscription `id` made again after a reconnect.
    Resubscribe { id: String },
    /// An `eth_unsubscribe`: nothing waits for it.
    Unsubscribe,
}

/// An open upstream WebSocket.
pub struct UpstreamSocket {
    /// The socket (accepted).
    pub ws: WebSocket,
    /// Which of `UPSTREAM_WS_URL` it is, for logs ([`Config::upstream_ws_name`]).
    pub index: usize,
    next_id: Cell<u64>,
    pending: RefCell<HashMap<u64, Pending>>,
}

impl UpstreamSocket {
    /// Connects to the first of `UPSTREAM_WS_URL` that accepts within `UPSTREAM_TIMEOUT_MS`
    /// (at most 10 s each).
    ///
    /// # Errors
    /// Why the last URL failed (redacted).
    pub async fn connect(config: &Config) -> Result<UpstreamSocket, String> {
        Self::connect_from(config, 0).await
    }

    /// [`UpstreamSocket::connect`], trying the URLs from the one at `first` on (then the ones
    /// before it).
    ///
    /// # Errors
    /// Why the last URL failed (redacted).
    pub async fn connect_from(config: &Config, first: usize) -> Result<UpstreamSocket, String> {
        let timeout_ms = config.upstream_timeout_ms.min(10_000);
        let mut last = String::from("no UPSTREAM_WS_URL");
        let urls = &config.upstream_ws_urls;
        let order = (0..urls.len()).map(|i| (first + i) % urls.len());
        for (index, url) in order.map(|i| (i, &urls[i])) {
            let Ok(parsed) = Url::parse(url) else {
                last = format!("{} is not a URL", config.upstream_ws_name(index));
                continue;
            };
            let connect = pin!(WebSocket::connect(parsed));
            let timer = pin!(Delay::from(Duration::from_millis(timeout_ms)));
            let outcome = match select(connect, timer).await {
                Either::Left((Ok(ws), _)) => ws.accept().map(|_| ws).map_err(|e| e.to_string()),
                Either::Left((Err(e), _)) => Err(e.to_string()),
                Either::Right(_) => Err(format!("no answer within {timeout_ms} ms")),
            };
            match outcome {
                Ok(ws) => {
                    return Ok(UpstreamSocket {
                        ws,
                        index,
                        next_id: Cell::new(1),
                        pending: RefCell::new(HashMap::new()),
                    })
                }
                Err(why) => {
                    last = format!(
                        "{}: {}",
                        config.upstream_ws_name(index),
                        config.redact(&why)
                    )
                }
            }
        }
        Err(last)
    }

    /// Sends a request for `method` with `params` (JSON text) and records what its answer is
    /// for.
    ///
    /// # Errors
    /// The runtime's, when the socket no longer takes messages.
    pub fn request(&self, method: &str, params: &str, pending: Pending) -> Result<(), String> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let text =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        self.pending.borrow_mut().insert(id, pending);
        self.ws.send_with_str(text).map_err(|e| {
            self.pending.borrow_mut().remove(&id);
            e.to_string()
        })
    }

    /// What the answer `text` (a JSON-RPC response with a numeric id) was for, and the answer
    /// (a response with neither result nor error counts as a null result); `None` for anything
    /// else.
    pub fn answered(&self, text: &str) -> Option<(Pending, Answer)> {
        #[derive(Deserialize)]
        struct Id {
            id: Option<u64>,
        }
        let id = serde_json::from_str::<Id>(text).ok()?.id?;
        let pending = self.pending.borrow_mut().remove(&id)?;
        let answer = Answer::parse(text).unwrap_or_else(|| Answer::Result("null".into()));
        Some((pending, answer))
    }

    /// Ends upstream subscription `upstream_id`; nothing waits for the answer.
    pub fn unsubscribe(&self, upstream_id: &str) {
        let params = serde_json::json!([upstream_id]).to_string();
        let _ = self.request(UNSUBSCRIBE, &params, Pending::Unsubscribe);
    }

    /// Closes the socket: its client connection closed.
    pub fn close(&self) {
        let _ = self.ws.close(Some(1000), Some("client connection closed"));
    }

    /// Every request still waiting: the socket is gone, so none will be answered.
    pub fn abandon(&self) -> Vec<Pending> {
        self.pending.borrow_mut().drain().map(|(_, p)| p).collect()
    }
}

/// The upstream socket of a connection.
pub enum UpstreamState {
    /// None open: the next `eth_subscribe` connects.
    Down,
    /// Being connected (or reconnected): callers wait.
    Connecting,
    /// Open.
    Up(Rc<UpstreamSocket>),
}

/// -32002: no upstream WebSocket to serve a subscription, and why.
pub fn upstream_unavailable(why: &str) -> Answer {
    Answer::error(&RpcError::new(
        crate::jsonrpc::RESOURCE_UNAVAILABLE,
        format!("the upstream WebSocket is unavailable: {why}"),
    ))
}
