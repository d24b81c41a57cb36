//! `eth_subscribe` and `eth_unsubscribe` on a connection, over its upstream WebSocket.

use super::socket::{upstream_unavailable, Pending, UpstreamState};
use super::Connection;
use crate::jsonrpc::{self, Answer, Request, RpcError};
use crate::relay::socket::SubscriptionCalls;
use crate::websocket::subscriptions::Kind;
use crate::websocket::{Close, SUBSCRIBE, UNSUBSCRIBE};
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde_json::Value;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::Delay;

impl Connection {
    async fn subscribe(self: &Rc<Self>, req: &Request) -> Answer {
        let kind = match Kind::of_params(&req.params) {
            Ok(kind) => kind,
            Err(error) => return Answer::error(&error),
        };
        let limit = self.config.socket.max_subscriptions;
        if self.subscriptions.borrow().len() >= limit {
            let close = Close::TooManySubscriptions(limit);
            let error = close.error();
            self.close_after.replace(Some(close));
            return Answer::error(&error);
        }
        let socket = match self.upstream().await {
            Ok(socket) => socket,
            Err(why) => return upstream_unavailable(&why),
        };
        let (reply, answer) = oneshot::channel();
        let params = req.params.to_string();
        let pending = Pending::Subscribe {
            kind,
            params: params.clone(),
            reply,
        };
        if let Err(why) = socket.request(SUBSCRIBE, &params, pending) {
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
