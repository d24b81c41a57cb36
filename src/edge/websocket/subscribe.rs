//! `eth_subscribe` and `eth_unsubscribe` on a connection, over its upstream WebSocket.

use super::socket::{upstream_unavailable, Pending, UpstreamState};
use super::Connection;
use crate::jsonrpc::{self, Request, RpcError};
use crate::relay::socket::SubscriptionCalls;
use crate::websocket::subscriptions::Kind;
use crate::websocket::{Close, SUBSCRIBE, UNSUBSCRIBE};
use futures_channel::oneshot;
use futures_util::future::{select, Either};
use serde_json::{json, Value};
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;
use worker::Delay;

impl Connection {
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
