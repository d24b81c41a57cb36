//! `eth_getTransactionCount(address, "pending")`: answered by the sender's Durable Object (the
//! upstream's count raised past the transactions the object accepted that the upstream still
//! holds), or by the upstream when the object can't be reached.

use super::{Backend, Relay};
use crate::address::Address;
use crate::jsonrpc::{Request, Response};
use serde_json::Value;

/// The address of an `eth_getTransactionCount(address, "pending")` request; `None` for any other
/// request (another block tag, an EIP-1898 block object, malformed params: those go to the
/// upstream unchanged).
pub fn pending_count_of(req: &Request) -> Option<Address> {
    if req.method != "eth_getTransactionCount" {
        return None;
    }
    match req.params.as_array()?.as_slice() {
        [Value::String(address), Value::String(tag)] if tag == "pending" => address.parse().ok(),
        _ => None,
    }
}

impl<B: Backend> Relay<'_, B> {
    /// `eth_getTransactionCount(address, "pending")`: the sender's object answers it (it asks the
    /// upstream and raises its count past the accepted transactions the upstream still holds).
    /// When the object can't be reached, the upstream's own answer.
    pub(super) async fn pending_count(&self, req: &Request, address: &Address) -> Response {
        match self
            .retry_object_call(address, || self.backend.pending_count(address))
            .await
        {
            Ok(wire) => Response::new(&req.response_id(), wire.answer),
            Err(_) => self.proxy(req).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: Some(json!(1).into()),
            method: method.into(),
            params,
        }
    }

    #[test]
    fn only_the_pending_count_of_an_address_is_answered_by_the_relay() {
        let a = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let of = |m: &str, p| pending_count_of(&request(m, p)).map(|a| a.to_string());
        assert_eq!(
            of("eth_getTransactionCount", json!([a, "pending"])).as_deref(),
            Some("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266")
        );
        assert_eq!(of("eth_getTransactionCount", json!([a, "latest"])), None);
        assert_eq!(
            of(
                "eth_getTransactionCount",
                json!([a, {"blockNumber": "0x1"}])
            ),
            None
        );
        assert_eq!(
            of("eth_getTransactionCount", json!(["0x12", "pending"])),
            None
        );
        assert_eq!(of("eth_getBalance", json!([a, "pending"])), None);
        assert_eq!(of("eth_getTransactionCount", json!({})), None);
    }
}
