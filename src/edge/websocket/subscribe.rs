//! `eth_subscribe` and `eth_unsubscribe` on a connection, over its upstream WebSocket.

use super::socket::{upstream_unavailable, Pending, UpstreamState};
use super::Connection;
use crate::jsonrpc::{self, Answer, Request, RpcError};
use crate::relay::socket::SubscriptionCalls;
use crate::websocket::params::Subscribe;
use crate::websocket::subscriptions::Refused;
use crate::websocket::{Close, SUBSCRIBE, UNSUBSCRIBE};
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde_json::Value;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::Delay;

impl Connection {
    /// A client's `eth_subscribe`: its params checked whole and made anew, counted against
    /// `WS_MAX_SUBSCRIPTIONS` and charged to the connection's memory before anything goes
    /// upstream; then asked of the upstream socket. An ask that does not end here (no answer
    /// within `UPSTREAM_TIMEOUT_MS`) is settled by the upstream's answer when it comes
    /// ([`Connection::on_upstream_message`]) or by the socket's end.
    async fn subscribe(self: &Rc<Self>, req: &Request) -> Answer {
        let subscribe = match Subscribe::parse(&req.params) {
            Ok(subscribe) => subscribe,
            Err(error) => return Answer::error(&error),
        };
        let limit = self.config.socket.max_subscriptions;
        let asked = self.subscriptions.borrow_mut().ask(&subscribe, limit);
        match asked {
            Ok(()) => {}
            Err(refused @ Refused::TooMany(_)) => {
                self.close_after
                    .replace(Some(Close::TooManySubscriptions(limit)));
                return Answer::error(&refused.error());
            }
            Err(refused) => return Answer::error(&refused.error()),
        }
        let socket = match self.upstream().await {
            Ok(socket) => socket,
            Err(why) => {
                self.subscriptions.borrow_mut().abandon(&subscribe);
                return upstream_unavailable(&why);
            }
        };
        let (reply, answer) = oneshot::channel();
        let params = subscribe.params.clone();
        let pending = Pending::Subscribe {
            subscribe: subscribe.clone(),
            reply,
        };
        if let Err(why) = socket.request(SUBSCRIBE, &params, pending) {
            self.subscriptions.borrow_mut().abandon(&subscribe);
            return upstream_unavailable(&self.config.redact(&why));
        }
        let timer = pin!(Delay::from(Duration::from_millis(
            self.config.upstream_timeout_ms
        )));
        match select(answer, timer).await {
            Either::Left((Ok(answer), _)) => answer,
            Either::Left((Err(_), _)) => upstream_unavailable("the upstream WebSocket closed"),
            Either::Right(_) => upstream_unavailable(&format!(
                "no answer to eth_subscribe within {} ms",
                self.config.upstream_timeout_ms
            )),
        }
    }

    fn unsubscribe(&self, req: &Request) -> Answer {
        let Some(id) = req.params.get(0).and_then(Value::as_str) else {
            return Answer::error(&RpcError::new(
                jsonrpc::INVALID_PARAMS,
                "invalid params: eth_unsubscribe takes [subscription id]",
            ));
        };
        let removed = self.subscriptions.borrow_mut().remove(id);
        {
            let subscriptions = self.subscriptions.borrow();
            self.backfill
                .borrow_mut()
                .forget(id, subscriptions.memory());
        }
        if let Some(Some(upstream_id)) = &removed {
            if let UpstreamState::Up(socket) = &*self.upstream.borrow() {
                socket.unsubscribe(upstream_id);
            }
        }
        Answer::Result(removed.is_some().to_string())
    }
}

/// The connection answers `eth_subscribe` and `eth_unsubscribe` itself.
impl SubscriptionCalls for Rc<Connection> {
    async fn call(&self, req: &Request) -> String {
        let answer = match req.method.as_str() {
            SUBSCRIBE => self.subscribe(req).await,
            UNSUBSCRIBE => self.unsubscribe(req),
            other => Answer::error(&RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                format!("method not allowed: {other}"),
            )),
        };
        answer.render(&req.response_id())
    }
}
