//! What a key may do ([`Scope`]): which chains, methods, contracts and senders, from which
//! origins and IPs. Each batch member is checked on its own ([`Scope::check_read`],
//! [`Scope::check_send`]): one out of scope gets its own error (-32002, as Infura's "rejected due
//! to project ID settings"), and the rest of the batch goes on. Pure.

use crate::access::methods::matches;
use crate::address::Address;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A key's scope; an empty list allows anything of its kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scope {
    /// Chain ids it may use (`/evm/{id}`, or the default chain's id).
    pub chains: Vec<u64>,
    /// Method patterns it may call (an exact name, or a prefix ending in `*`), within the
    /// deployment's `METHOD_ALLOWLIST`/`METHOD_DENYLIST`, never beyond them.
    pub methods: Vec<String>,
    /// Method patterns it may not call; they win over `methods`.
    pub deny_methods: Vec<String>,
    /// Contract addresses its reads and sends may name (lowercase `0x` hex). Set: every read
    /// that names an account must name one of these, a read that names none where it could
    /// (`eth_getLogs` without an `address`), one with state or block overrides, or a method that
    /// runs arbitrary calls ([`ARBITRARY_CALLS`]) is refused, and a send's `to` must be one.
    pub contracts: Vec<Address>,
    /// Senders its sends may come from (the recovered sender): a key for one wallet's bot.
    pub senders: Vec<Address>,
    /// `Origin`s its browser requests may come from (`https://app.example`). Origin is no
    /// authentication: any non-browser client can send any Origin, so a key scoped by origin is
    /// a public key (fit for a dapp's frontend, with a budget), never a secret.
    pub origins: Vec<String>,
    /// Client IPs (`CF-Connecting-IP`, exact) it may come from.
    pub ips: Vec<String>,
}

/// Methods that run code the params carry, or trace or simulate anything: refused to a key with
/// a contract scope (they can touch any contract).
pub const ARBITRARY_CALLS: &[&str] = &[
    "eth_simulateV1",
    "eth_callMany",
    "eth_callBundle",
    "eth_createAccessList",
    "eth_multicallV1",
    "debug_*",
    "trace_*",
    "ots_*",
];

/// Methods whose first param is the account they read.
const ACCOUNT_FIRST: &[&str] = &[
    "eth_getBalance",
    "eth_getCode",
    "eth_getStorageAt",
    "eth_getTransactionCount",
    "eth_getProof",
    "eth_getAccount",
];

/// Why a member (or a request) is out of its key's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutOfScope {
    /// The chain is not one of the key's.
    Chain(u64),
    /// The method is not the key's.
    Method(String),
    /// A contract the key may not name (or none named where the key needs one).
    Contract(String),
    /// State or block overrides, or a method that runs arbitrary calls, with a contract scope.
    Arbitrary(String),
    /// A send from a sender not the key's.
    Sender(Address),
    /// A request from an origin not the key's.
    Origin(String),
    /// A request from an IP not the key's.
    Ip,
}

impl OutOfScope {
    /// The scope a refusal names (`data.scope` of its error).
    pub fn scope(&self) -> &'static str {
        match self {
            OutOfScope::Chain(_) => "chains",
            OutOfScope::Method(_) => "methods",
            OutOfScope::Contract(_) | OutOfScope::Arbitrary(_) => "contracts",
            OutOfScope::Sender(_) => "senders",
            OutOfScope::Origin(_) => "origins",
            OutOfScope::Ip => "ips",
        }
    }
}

impl OutOfScope {
    /// The JSON-RPC error it is answered with: -32002 (Infura's), `data.scope` the scope.
    pub fn error(&self) -> crate::jsonrpc::RpcError {
        crate::jsonrpc::RpcError {
            data: Some(serde_json::json!({ "scope": self.scope() })),
            ..crate::jsonrpc::RpcError::new(super::REJECTED_BY_KEY, self.to_string())
        }
    }
}

impl std::fmt::Display for OutOfScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cut = |s: &str| s.chars().take(80).collect::<String>();
        match self {
            OutOfScope::Chain(id) => write!(
                f,
                "rejected by the key's scope: chain {id} is not one of its chains"
            ),
            OutOfScope::Method(m) => write!(
                f,
                "rejected by the key's scope: method {} is not one of its methods",
                cut(m)
            ),
            OutOfScope::Contract(why) => write!(f, "rejected by the key's scope: {why}"),
            OutOfScope::Arbitrary(why) => write!(
                f,
                "rejected by the key's scope: {why} with a contract scope"
            ),
            OutOfScope::Sender(a) => write!(
                f,
                "rejected by the key's scope: sender {a} is not one of its senders"
            ),
            OutOfScope::Origin(o) => write!(
                f,
                "rejected by the key's scope: origin {} is not one of its origins",
                cut(o)
            ),
            OutOfScope::Ip => {
                f.write_str("rejected by the key's scope: this client's IP is not one of its IPs")
            }
        }
    }
}

/// `true` when `method` matches one of `patterns` (the method lists' rule,
/// [`crate::access::methods::Patterns`]: trimmed, empty ones ignored).
fn matches_any<S: AsRef<str>>(patterns: &[S], method: &str) -> bool {
    patterns
        .iter()
        .map(|p| p.as_ref().trim())
        .any(|p| !p.is_empty() && matches(p, method))
}

/// The addresses a value names: one `0x…` string, or an array of them; `None` when it is
/// neither (absent, null, malformed).
fn addresses(value: &Value) -> Option<Vec<Option<Address>>> {
    match value {
        Value::String(s) => Some(vec![s.parse().ok()]),
        Value::Array(items) if !items.is_empty() => Some(
            items
                .iter()
                .map(|v| v.as_str().and_then(|s| s.parse().ok()))
                .collect(),
        ),
        _ => None,
    }
}

impl Scope {
    /// Whether a request for chain `chain_id` from `origin` (its `Origin` header) and `ip` may
    /// use the key at all (checked once per request, before its members).
    pub fn check_request(
        &self,
        chain_id: u64,
        origin: Option<&str>,
        ip: &str,
    ) -> Result<(), OutOfScope> {
        if !self.chains.is_empty() && !self.chains.contains(&chain_id) {
            return Err(OutOfScope::Chain(chain_id));
        }
        if !self.origins.is_empty() {
            let origin = origin.unwrap_or("");
            if !self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
                return Err(OutOfScope::Origin(origin.to_string()));
            }
        }
        if !self.ips.is_empty() && !self.ips.iter().any(|a| a == ip) {
            return Err(OutOfScope::Ip);
        }
        Ok(())
    }

    /// Whether the key may call `method` at all.
    pub fn check_method(&self, method: &str) -> Result<(), OutOfScope> {
        let allowed = self.methods.is_empty() || matches_any(&self.methods, method);
        if !allowed || matches_any(&self.deny_methods, method) {
            return Err(OutOfScope::Method(method.to_string()));
        }
        Ok(())
    }

    /// Whether a read (or any call that is not a send) of `method` with `params` is in scope:
    /// its method, and with a contract scope, every account it names.
    pub fn check_read(&self, method: &str, params: &Value) -> Result<(), OutOfScope> {
        self.check_method(method)?;
        if self.contracts.is_empty() {
            return Ok(());
        }
        if matches_any(ARBITRARY_CALLS, method) {
            return Err(OutOfScope::Arbitrary(format!("method {method}")));
        }
        let named = match method {
            "eth_call" | "eth_estimateGas" => {
                let overrides = [2, 3].iter().any(|&i| !params[i].is_null());
                if overrides {
                    return Err(OutOfScope::Arbitrary("state or block overrides".into()));
                }
                addresses(&params[0]["to"])
            }
            "eth_getLogs" | "eth_newFilter" => addresses(&params[0]["address"]),
            "eth_subscribe" if params[0] == "logs" => addresses(&params[1]["address"]),
            m if ACCOUNT_FIRST.contains(&m) => addresses(&params[0]),
            // Names no account: blocks, receipts, the chain's constants, the head.
            _ => return Ok(()),
        };
        let Some(named) = named else {
            return Err(OutOfScope::Contract(format!(
                "{method} names no contract, and the key may name only its own"
            )));
        };
        for address in named {
            match address {
                Some(a) if self.contracts.contains(&a) => {}
                Some(a) => {
                    return Err(OutOfScope::Contract(format!(
                        "contract {a} is not one of its contracts"
                    )))
                }
                None => {
                    return Err(OutOfScope::Contract(format!(
                        "{method} names a malformed address"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Whether a send (`method`, decoded: its recovered `sender` and its `to`, `None` for a
    /// contract creation) is in scope.
    pub fn check_send(
        &self,
        method: &str,
        sender: &Address,
        to: Option<&Address>,
    ) -> Result<(), OutOfScope> {
        self.check_method(method)?;
        if !self.senders.is_empty() && !self.senders.contains(sender) {
            return Err(OutOfScope::Sender(*sender));
        }
        if !self.contracts.is_empty() {
            match to {
                Some(to) if self.contracts.contains(to) => {}
                Some(to) => {
                    return Err(OutOfScope::Contract(format!(
                        "a send to {to}, not one of its contracts"
                    )))
                }
                None => {
                    return Err(OutOfScope::Contract(
                        "a contract creation, with a contract scope".into(),
                    ))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TOKEN: &str = "0x00000000000000000000000000000000000000aa";
    const OTHER: &str = "0x00000000000000000000000000000000000000bb";

    fn contract_scope() -> Scope {
        Scope {
            contracts: vec![TOKEN.parse().unwrap()],
            ..Scope::default()
        }
    }

    #[test]
    fn an_empty_scope_allows_everything() {
        let s = Scope::default();
        assert!(s.check_request(1, None, "1.2.3.4").is_ok());
        assert!(s.check_read("eth_simulateV1", &json!([{}])).is_ok());
        let a: Address = OTHER.parse().unwrap();
        assert!(s.check_send("eth_sendRawTransaction", &a, None).is_ok());
    }

    #[test]
    fn chains_origins_and_ips_refuse_the_whole_request() {
        let s = Scope {
            chains: vec![1, 8453],
            origins: vec!["https://app.example".into()],
            ips: vec!["10.0.0.1".into()],
            ..Scope::default()
        };
        assert!(s
            .check_request(8453, Some("https://APP.example"), "10.0.0.1")
            .is_ok());
        assert_eq!(
            s.check_request(10, Some("https://app.example"), "10.0.0.1"),
            Err(OutOfScope::Chain(10))
        );
        assert_eq!(
            s.check_request(1, None, "10.0.0.1").unwrap_err().scope(),
            "origins"
        );
        assert_eq!(
            s.check_request(1, Some("https://app.example"), "10.0.0.2"),
            Err(OutOfScope::Ip)
        );
    }

    #[test]
    fn methods_allow_and_deny_as_the_method_lists() {
        let s = Scope {
            methods: vec![
                "eth_get*".into(),
                "eth_call".into(),
                "eth_sendRawTransaction".into(),
            ],
            deny_methods: vec!["eth_getLogs".into()],
            ..Scope::default()
        };
        assert!(s
            .check_read("eth_getBalance", &json!([TOKEN, "latest"]))
            .is_ok());
        assert!(s.check_read("eth_call", &json!([{"to": TOKEN}])).is_ok());
        assert_eq!(
            s.check_read("eth_getLogs", &json!([{}]))
                .unwrap_err()
                .scope(),
            "methods"
        );
        assert_eq!(
            s.check_read("eth_blockNumber", &json!([]))
                .unwrap_err()
                .scope(),
            "methods"
        );
    }

    #[test]
    fn a_contract_scope_checks_every_method_that_names_an_account() {
        let s = contract_scope();
        let ok = [
            ("eth_call", json!([{"to": TOKEN, "data": "0x"}, "latest"])),
            ("eth_estimateGas", json!([{"to": TOKEN}])),
            (
                "eth_getLogs",
                json!([{"address": TOKEN, "fromBlock": "0x1"}]),
            ),
            ("eth_getLogs", json!([{"address": [TOKEN]}])),
            ("eth_newFilter", json!([{"address": TOKEN}])),
            ("eth_subscribe", json!(["logs", {"address": TOKEN}])),
            ("eth_subscribe", json!(["newHeads"])),
            ("eth_getCode", json!([TOKEN, "latest"])),
            ("eth_getStorageAt", json!([TOKEN, "0x0", "latest"])),
            ("eth_getBalance", json!([TOKEN, "latest"])),
            ("eth_blockNumber", json!([])),
            ("eth_getTransactionReceipt", json!(["0xab"])),
        ];
        for (m, p) in ok {
            assert!(s.check_read(m, &p).is_ok(), "{m} {p}");
        }
        let refused = [
            ("eth_call", json!([{"to": OTHER}])),
            ("eth_call", json!([{"data": "0x00"}])),
            (
                "eth_call",
                json!([{"to": TOKEN}, "latest", {OTHER: {"code": "0x00"}}]),
            ),
            (
                "eth_call",
                json!([{"to": TOKEN}, "latest", null, {"number": "0x1"}]),
            ),
            ("eth_getLogs", json!([{"fromBlock": "0x1"}])),
            ("eth_getLogs", json!([{"address": [TOKEN, OTHER]}])),
            ("eth_getLogs", json!([{"address": [TOKEN, "nope"]}])),
            ("eth_subscribe", json!(["logs", {}])),
            ("eth_getBalance", json!([OTHER, "latest"])),
            ("eth_simulateV1", json!([{}])),
            ("eth_createAccessList", json!([{"to": TOKEN}])),
            ("debug_traceCall", json!([{"to": TOKEN}])),
            ("trace_call", json!([{"to": TOKEN}])),
        ];
        for (m, p) in refused {
            let why = s.check_read(m, &p).unwrap_err();
            assert_eq!(why.scope(), "contracts", "{m} {p}");
        }
    }

    #[test]
    fn a_send_is_checked_by_its_sender_and_its_to() {
        let bot: Address = "0x00000000000000000000000000000000000000cc"
            .parse()
            .unwrap();
        let token: Address = TOKEN.parse().unwrap();
        let other: Address = OTHER.parse().unwrap();
        let s = Scope {
            senders: vec![bot],
            ..contract_scope()
        };
        let m = "eth_sendRawTransaction";
        assert!(s.check_send(m, &bot, Some(&token)).is_ok());
        assert_eq!(
            s.check_send(m, &other, Some(&token)),
            Err(OutOfScope::Sender(other))
        );
        assert_eq!(
            s.check_send(m, &bot, Some(&other)).unwrap_err().scope(),
            "contracts"
        );
        assert_eq!(
            s.check_send(m, &bot, None).unwrap_err().scope(),
            "contracts"
        );
    }
}
