//! What a connection's subscriptions missed while its upstream socket was away, fetched over
//! HTTP by tasks of their own, never inside the read loop: the missed `newHeads` in one batch for
//! the whole connection ([`Connection::fill_heads`]), the logs of the gap each delivered once
//! ([`Connection::fill_logs`]).

use super::{log, Connection};
use crate::edge::backend::WorkerBackend;
use crate::upstream::CallKind;
use crate::upstream::Platform;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen_futures::spawn_local;
use worker::Delay;

/// How long one HTTP question about a gap may take, ms (at most `UPSTREAM_TIMEOUT_MS`): a
/// reconnect does not wait a minute for the head of a node that is down.
const GAP_QUESTION_MS: u64 = 5_000;
/// How many times the head is asked once the subscriptions are made again, 1 s apart, before a
/// logs gap is given up.
const HEAD_ATTEMPTS: u32 = 3;

impl Connection {
    /// Starts the fetch of the `newHeads` the subscriptions missed, when some wait and none runs.
    pub(super) fn fill_heads(self: &Rc<Self>) {
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
                connection.send_notification(text);
            }
            log(
                "ws_heads_gap",
                &connection.request_id,
                &connection.config,
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
        let Ok(reply) = backend.post(&body, CallKind::Head, timeout_ms).await else {
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
    pub(super) async fn fill_logs(self: Rc<Self>) {
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
                &self.config,
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
                self.send_notification(text);
            }
            sent += texts.len();
        }
        log(
            "ws_logs_gap",
            &self.request_id,
            &self.config,
            &[
                ("to_block", to.into()),
                ("fetched", found.iter().any(Option::is_some).into()),
                ("subscriptions", queries.len().into()),
                ("sent", sent.into()),
            ],
        );
    }
}
