//! The params of the four send methods (`eth_sendRawTransaction`, `eth_sendRawTransactionSync`,
//! `eth_sendRawTransactionConditional`, `eth_sendPrivateTransaction`) read as a raw transaction
//! and its [`SendMethod`].

use crate::jsonrpc::{
    self, Request, SEND_PRIVATE_TRANSACTION, SEND_RAW_TRANSACTION,
    SEND_RAW_TRANSACTION_CONDITIONAL, SEND_RAW_TRANSACTION_SYNC,
};
use crate::ordering::tx::SendMethod;
use serde_json::Value;

/// The send-and-wait timeouts of a request: the default and the cap, ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTimeouts {
    /// `SYNC_TIMEOUT_MS`: without a timeout, or with an invalid one.
    pub default_ms: u64,
    /// `SYNC_TIMEOUT_MAX_MS`: the longest a call may ask for.
    pub max_ms: u64,
}

/// The raw transaction of a send request (any of [`jsonrpc::is_send`]) and how it was sent.
///
/// # Errors
/// -32602 saying what is wrong with the params: `eth_sendRawTransaction` takes `[raw]`,
/// `eth_sendRawTransactionSync` `[raw]` or `[raw, timeout]` (ms, a number or a hex quantity,
/// capped at `SYNC_TIMEOUT_MAX_MS`; without one, or an invalid one, `SYNC_TIMEOUT_MS`: EIP-7966),
/// `eth_sendRawTransactionConditional` `[raw, options]` with `options` an object (ERC-7796),
/// `eth_sendPrivateTransaction` `[{"tx": raw, "maxBlockNumber"?: quantity, "preferences"?:
/// object}]` (Flashbots Protect's).
pub fn send_params(
    req: &Request,
    timeouts: SyncTimeouts,
) -> Result<(Vec<u8>, SendMethod), jsonrpc::RpcError> {
    let invalid = |why: &str| {
        jsonrpc::RpcError::new(jsonrpc::INVALID_PARAMS, format!("invalid params: {why}"))
    };
    if req.method == SEND_PRIVATE_TRANSACTION {
        return private_params(&req.params).map_err(|why| invalid(&why));
    }
    let items = req.params.as_array();
    let (first, second) = match items.map(Vec::as_slice) {
        Some([first, second]) if req.method != SEND_RAW_TRANSACTION => {
            (first.clone(), Some(second))
        }
        _ if req.method == SEND_RAW_TRANSACTION_CONDITIONAL => {
            return Err(invalid("expected [raw transaction, options] (ERC-7796)"))
        }
        _ => (req.params.clone(), None),
    };
    let raw = match second {
        Some(_) => jsonrpc::raw_transaction_param(&Value::Array(vec![first]))?,
        None => jsonrpc::raw_transaction_param(&first)?,
    };
    let method = match req.method.as_str() {
        SEND_RAW_TRANSACTION_SYNC => SendMethod::Sync {
            timeout_ms: sync_timeout(second, timeouts),
        },
        SEND_RAW_TRANSACTION_CONDITIONAL => match second {
            Some(options @ Value::Object(_)) => SendMethod::Conditional {
                options: options.clone(),
            },
            _ => return Err(invalid("the options of ERC-7796 must be an object")),
        },
        _ => SendMethod::Plain,
    };
    Ok((raw, method))
}

/// The params of `eth_sendPrivateTransaction`: `[{"tx", "maxBlockNumber", "preferences"}]`; any
/// other member of the object is left out of what goes on.
fn private_params(params: &Value) -> Result<(Vec<u8>, SendMethod), String> {
    let shape = "expected [{\"tx\": raw transaction, \"maxBlockNumber\"?: hex quantity, \
                 \"preferences\"?: object}] (eth_sendPrivateTransaction)";
    let Some([Value::Object(object)]) = params.as_array().map(Vec::as_slice) else {
        return Err(shape.into());
    };
    let raw = object.get("tx").ok_or_else(|| shape.to_string())?;
    let raw = jsonrpc::raw_transaction_param(&Value::Array(vec![raw.clone()]))
        .map_err(|e| e.message.trim_start_matches("invalid params: ").to_string())?;
    let max_block_number = match object.get("maxBlockNumber") {
        None | Some(Value::Null) => None,
        Some(Value::String(q)) => Some(
            crate::hex::decode_quantity(q)
                .map_err(|_| format!("maxBlockNumber is not a hex quantity: {q:.40}"))?,
        ),
        Some(Value::Number(n)) => Some(
            n.as_u64()
                .ok_or_else(|| format!("maxBlockNumber is not a block number: {n}"))?,
        ),
        Some(_) => return Err("maxBlockNumber is not a hex quantity".into()),
    };
    let preferences = match object.get("preferences") {
        None | Some(Value::Null) => None,
        Some(p @ Value::Object(_)) => Some(p.clone()),
        Some(_) => return Err("preferences must be an object".into()),
    };
    Ok((
        raw,
        SendMethod::Private {
            max_block_number,
            preferences,
        },
    ))
}

/// The send-and-wait timeout, ms: the client's (a number or a hex quantity) capped at
/// `max_ms`; `default_ms` when it gave none or an invalid one.
fn sync_timeout(param: Option<&Value>, timeouts: SyncTimeouts) -> u64 {
    let asked = match param {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(q)) => crate::hex::decode_quantity(q).ok(),
        _ => None,
    };
    match asked {
        Some(ms) if ms > 0 => ms.min(timeouts.max_ms),
        _ => timeouts.default_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn send_params_of_the_three_methods() {
        let timeouts = SyncTimeouts {
            default_ms: 2_000,
            max_ms: 30_000,
        };
        let req = |method: &str, params: Value| Request {
            id: Some(json!(1).into()),
            method: method.into(),
            params,
        };
        assert_eq!(
            send_params(&req(SEND_RAW_TRANSACTION, json!(["0x01"])), timeouts).unwrap(),
            (vec![1], SendMethod::Plain)
        );
        for (timeout, want) in [
            (json!(500), 500),
            (json!("0x1f4"), 500),
            (json!(90_000), 30_000),
            (json!(0), 2_000),
            (json!("soon"), 2_000),
        ] {
            let (_, method) = send_params(
                &req(SEND_RAW_TRANSACTION_SYNC, json!(["0x01", timeout])),
                timeouts,
            )
            .unwrap();
            assert_eq!(method, SendMethod::Sync { timeout_ms: want });
        }
        for bad in [
            req(SEND_RAW_TRANSACTION_CONDITIONAL, json!(["0x01"])),
            req(SEND_RAW_TRANSACTION_CONDITIONAL, json!(["0x01", 5])),
            req(SEND_RAW_TRANSACTION, json!(["0x01", {}])),
        ] {
            assert_eq!(send_params(&bad, timeouts).unwrap_err().code, -32602);
        }
    }
}
