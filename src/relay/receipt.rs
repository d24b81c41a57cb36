//! `eth_sendRawTransactionSync` (EIP-7966): a send-and-wait call goes to its sender's object as a
//! plain `eth_sendRawTransaction` of its bytes ([`crate::ordering::tx::SendMethod::Sync`]), so the
//! lock is released as soon as the upstream accepted it and upstreams that do not serve the
//! method work too; the wait for the receipt happens here, in the Worker, outside the lock. Not
//! included in time: error code 4 with the transaction hash as `data`; a nonce gap at its turn:
//! code 6 with the expected nonce (the object's answer,
//! [`crate::ordering::sender::refusal::SYNC_NONCE_GAP`]).

use super::{Backend, Relay};
use crate::jsonrpc::{Answer, RpcError};
use crate::upstream::CallKind;
use serde_json::{json, Value};

/// EIP-7966's error code for a transaction accepted but not included within the timeout; `data`
/// is its hash.
pub const SYNC_TIMEOUT: i64 = 4;

/// The first wait between two receipt polls, ms; it doubles up to [`RECEIPT_POLL_MAX_MS`].
const RECEIPT_POLL_MS: u64 = 100;
/// The longest wait between two receipt polls, ms.
const RECEIPT_POLL_MAX_MS: u64 = 1_000;

impl<B: Backend> Relay<'_, B> {
    /// What a send-and-wait call gets once its sender's object answered `answer`: an error as it
    /// is; the hash turned into the receipt (`eth_getTransactionReceipt`, polled 100 ms apart,
    /// doubling to 1 s, until `timeout_ms`), or code 4 with the hash when it is not included by
    /// then.
    pub(super) async fn wait_receipt(&self, answer: Answer, timeout_ms: u64) -> Answer {
        let Answer::Result(raw) = &answer else {
            return answer;
        };
        let Ok(hash) = serde_json::from_str::<String>(raw) else {
            return answer;
        };
        let request = json!({
            "jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionReceipt", "params": [hash],
        })
        .to_string();
        let deadline = self.backend.now_ms().saturating_add(timeout_ms);
        let mut pause = RECEIPT_POLL_MS;
        loop {
            let left = deadline.saturating_sub(self.backend.now_ms());
            let attempt = self.config.upstream_timeout_ms.min(left).max(1);
            if let Ok(reply) = self
                .backend
                .post(&request, CallKind::OwnReceipt, attempt)
                .await
            {
                if let Some(Answer::Result(receipt)) = Answer::parse(&reply.body) {
                    if receipt != "null" {
                        return Answer::Result(receipt);
                    }
                }
            }
            let now = self.backend.now_ms();
            if now >= deadline {
                break;
            }
            self.backend.sleep(pause.min(deadline - now)).await;
            pause = (pause * 2).min(RECEIPT_POLL_MAX_MS);
        }
        let mut error = RpcError::new(
            SYNC_TIMEOUT,
            format!(
                "the transaction was added to the pool but not included within {timeout_ms} ms"
            ),
        );
        error.data = Some(Value::String(hash));
        Answer::error(&error)
    }
}
