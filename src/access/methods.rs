//! Which JSON-RPC methods a public endpoint passes on: methods that reach into the node's
//! administration, its keys or its pool are refused (-32601) unless listed in `METHOD_ALLOWLIST`;
//! `METHOD_DENYLIST` refuses more. Nothing refused reaches the upstream.

/// Refused unless allowed: node administration and debugging (`admin_`, `debug_`, `miner_`,
/// `txpool_`), the consensus client's Engine API (`engine_`), and everything that uses keys held
/// by the node (`personal_`, `eth_sign`, `eth_signTransaction`, `eth_signTypedData*`,
/// `eth_sendTransaction`).
pub const DENIED_BY_DEFAULT: &[&str] = &[
    "admin_*",
    "debug_*",
    "personal_*",
    "miner_*",
    "engine_*",
    "txpool_*",
    "eth_sign*",
    "eth_sendTransaction",
];

/// A list of method patterns: an exact name, or a prefix ending in `*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Patterns(Vec<String>);

impl Patterns {
    /// Reads a comma-separated list (`admin_nodeInfo, debug_*`); `None` or empty is no pattern.
    pub fn parse(value: Option<&str>) -> Self {
        Patterns(
            value
                .unwrap_or_default()
                .split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        )
    }

    /// Whether `method` matches one of the patterns.
    pub fn matches(&self, method: &str) -> bool {
        self.0.iter().any(|p| matches(p, method))
    }
}

/// Whether `method` matches one `pattern`: an exact name, or a prefix ending in `*`.
pub fn matches(pattern: &str, method: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => method.starts_with(prefix),
        None => method == pattern,
    }
}

/// `METHOD_ALLOWLIST` and `METHOD_DENYLIST`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MethodPolicy {
    /// Methods let through although [`DENIED_BY_DEFAULT`].
    pub allow: Patterns,
    /// Methods refused as well; they win over the allowlist.
    pub deny: Patterns,
}

impl MethodPolicy {
    /// Whether `method` may go to the upstream.
    pub fn allows(&self, method: &str) -> bool {
        if self.deny.matches(method) {
            return false;
        }
        !DENIED_BY_DEFAULT.iter().any(|p| matches(p, method)) || self.allow.matches(method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_refuse_node_keys_and_administration_only() {
        let policy = MethodPolicy::default();
        for method in [
            "admin_peers",
            "debug_traceTransaction",
            "personal_unlockAccount",
            "miner_start",
            "engine_newPayloadV4",
            "txpool_content",
            "eth_sign",
            "eth_signTransaction",
            "eth_signTypedData_v4",
            "eth_sendTransaction",
        ] {
            assert!(!policy.allows(method), "{method}");
        }
        for method in [
            "eth_sendRawTransaction",
            "eth_call",
            "eth_getLogs",
            "net_version",
            "web3_clientVersion",
        ] {
            assert!(policy.allows(method), "{method}");
        }
    }

    #[test]
    fn the_allowlist_lets_some_through_and_the_denylist_adds_more() {
        let policy = MethodPolicy {
            allow: Patterns::parse(Some("txpool_status, debug_trace*")),
            deny: Patterns::parse(Some("eth_getLogs,debug_traceCall")),
        };
        assert!(policy.allows("txpool_status"));
        assert!(!policy.allows("txpool_content"));
        assert!(policy.allows("debug_traceTransaction"));
        assert!(!policy.allows("debug_traceCall"), "the denylist wins");
        assert!(!policy.allows("eth_getLogs"));
        assert!(policy.allows("eth_call"));
    }
}
