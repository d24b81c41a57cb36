//! The settings as the Worker's environment gives them: defaults, every variable, bad values,
//! the upstream pool by chain, redaction.

use super::*;
use crate::upstream::route::UpstreamSet;
use std::collections::HashMap;

fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|name| map.get(name).cloned())
}

#[test]
fn defaults() {
    let c = config(&[("UPSTREAM_RPC_URL", "http://127.0.0.1:8545")]).unwrap();
    assert_eq!(c.chain_id, None);
    assert!(!c.allow_unprotected_txs);
    assert!(c.enable_nonce_ordering);
    assert_eq!(c.lock_max_hold_ms, 30_000);
    assert_eq!(c.max_batch, 100);
    assert_eq!(c.nonce_gap_wait_ms, 3_000);
    assert_eq!(c.upstream_retries, None);
    assert_eq!(c.retry_policy().max_retries, None);
    assert_eq!(c.idempotency_ttl_ms, 300_000);
    assert_eq!(c.replacement_policy, None);
    assert_eq!(
        c.sender_settings(None).replacement,
        ReplacementPolicy::Forward
    );
    assert_eq!(c.sender_settings(None).pool, PoolKind::Mempool);
    assert_eq!(c.hardfork, Some(Hardfork::Osaka));
    assert_eq!(c.max_queue_per_sender, 64);
    assert_eq!(c.max_sender_bytes, 8 * 1024 * 1024);
    assert_eq!(c.admin_token, None);
    assert_eq!(c.cors_origins, CorsOrigins::Any);
    assert!(!c.methods.allows("admin_peers") && c.methods.allows("eth_call"));
    assert_eq!(c.rate_limit_period_s, 60);
    assert_eq!((c.track_interval_ms, c.track_ttl_ms), (12_000, 600_000));
    assert_eq!((c.sync_timeout_ms, c.sync_timeout_max_ms), (2_000, 30_000));
}

#[test]
fn parses_every_setting() {
    let c = config(&[
        ("UPSTREAM_RPC_URL", "https://node.example/key"),
        ("CHAIN_ID", "0x7a69"),
        ("ALLOW_UNPROTECTED_TXS", "true"),
        ("ENABLE_NONCE_ORDERING", "false"),
        ("LOCK_MAX_HOLD_MS", "500"),
        ("NONCE_GAP_WAIT_MS", "250"),
        ("MAX_BATCH", "5"),
        ("MAX_REQUEST_BYTES", "1000"),
        ("MAX_UPSTREAM_RESPONSE_BYTES", "2000"),
        ("UPSTREAM_TIMEOUT_MS", "3000"),
        ("UPSTREAM_RETRIES", "0"),
        ("IDEMPOTENCY_TTL_S", "2"),
        ("REPLACEMENT_POLICY", "reject"),
        ("MAX_QUEUE_PER_SENDER", "8"),
        ("MAX_SENDER_BYTES", "1000000"),
        ("ADMIN_TOKEN", "s3cret"),
        ("CORS_ORIGINS", "https://app.example"),
        ("METHOD_ALLOWLIST", "txpool_status"),
        ("METHOD_DENYLIST", "eth_getLogs"),
        ("RATE_LIMIT_PERIOD_S", "10"),
    ])
    .unwrap();
    assert_eq!((c.upstream_retries, c.idempotency_ttl_ms), (Some(0), 2_000));
    assert_eq!(c.replacement_policy, Some(ReplacementPolicy::Reject));
    assert_eq!(c.max_queue_per_sender, 8);
    assert_eq!(c.sender_settings(None).max_bytes, 1_000_000);
    assert_eq!(c.admin_token.as_deref(), Some("s3cret"));
    assert_eq!(c.retry_policy().attempt_timeout_ms, 3_000);
    assert!(matches!(c.cors_origins, CorsOrigins::List(ref l) if l == &["https://app.example"]));
    assert!(c.methods.allows("txpool_status") && !c.methods.allows("eth_getLogs"));
    assert_eq!(c.rate_limit_period_s, 10);
    assert_eq!(c.chain_id, Some(31337));
    assert!(c.allow_unprotected_txs && !c.enable_nonce_ordering);
    assert_eq!(
        (c.lock_max_hold_ms, c.max_batch, c.max_request_bytes),
        (500, 5, 1000)
    );
    assert_eq!(
        (
            c.max_upstream_response_bytes,
            c.upstream_timeout_ms,
            c.nonce_gap_wait_ms
        ),
        (2000, 3000, 250)
    );
    assert_eq!(
        config(&[("UPSTREAM_RPC_URL", "http://x"), ("CHAIN_ID", "1")])
            .unwrap()
            .chain_id,
        Some(1)
    );
}

#[test]
fn refuses_bad_values() {
    assert_eq!(config(&[]).unwrap_err().name, "UPSTREAM_RPC_URL");
    assert_eq!(
        config(&[("UPSTREAM_RPC_URL", "ftp://x")]).unwrap_err().name,
        "UPSTREAM_RPC_URL"
    );
    let with = |k, v| {
        config(&[("UPSTREAM_RPC_URL", "http://x"), (k, v)])
            .unwrap_err()
            .name
    };
    assert_eq!(with("CHAIN_ID", "one"), "CHAIN_ID");
    assert_eq!(with("LOCK_MAX_HOLD_MS", "-1"), "LOCK_MAX_HOLD_MS");
    assert_eq!(with("LOCK_MAX_HOLD_MS", "0"), "LOCK_MAX_HOLD_MS");
    assert_eq!(
        with("ENABLE_NONCE_ORDERING", "yes"),
        "ENABLE_NONCE_ORDERING"
    );
    assert_eq!(with("REPLACEMENT_POLICY", "drop"), "REPLACEMENT_POLICY");
    assert_eq!(with("UPSTREAM_POOL", "hedera"), "UPSTREAM_POOL");
    assert_eq!(
        config(&[
            ("UPSTREAM_RPC_URL", "http://x"),
            ("UPSTREAM_POOL", "hedera")
        ])
        .unwrap_err()
        .problem,
        r#"must be auto, mempool or strict, got "hedera""#
    );
    assert_eq!(
        config(&[
            ("UPSTREAM_RPC_URL", "http://x"),
            ("REPLACEMENT_POLICY", "drop")
        ])
        .unwrap_err()
        .problem,
        r#"must be forward or reject, got "drop""#
    );
    assert_eq!(with("HARDFORK", "amsterdam"), "HARDFORK");
    assert_eq!(with("UPSTREAM_RETRIES", "-1"), "UPSTREAM_RETRIES");
    assert_eq!(with("UPSTREAM_RETRIES", "forever"), "UPSTREAM_RETRIES");
    assert_eq!(
        config(&[
            ("UPSTREAM_RPC_URL", "http://x"),
            ("UPSTREAM_RETRIES", "deadline")
        ])
        .unwrap()
        .upstream_retries,
        None
    );
}

#[test]
fn getlogs_upstream_range_gives_one_cap_for_all_or_one_per_upstream() {
    let two = |range| {
        config(&[
            ("UPSTREAM_RPC_URL", "https://a.example,https://b.example"),
            ("GETLOGS_UPSTREAM_RANGE", range),
        ])
    };
    let each = two(",500").unwrap().logs.upstream_range;
    assert_eq!((each.of(0), each.of(1)), (None, Some(500)));
    let all = two("1000").unwrap().logs.upstream_range;
    assert_eq!((all.of(0), all.of(1)), (Some(1_000), Some(1_000)));
    let three = two("1,2,3").unwrap_err();
    assert_eq!(three.name, "GETLOGS_UPSTREAM_RANGE");
    assert!(
        three.problem.contains("one per upstream"),
        "{}",
        three.problem
    );
    assert_eq!(two("0").unwrap_err().name, "GETLOGS_UPSTREAM_RANGE");
}

#[test]
fn several_upstreams_named_by_position_and_host_and_all_redacted() {
    let c = config(&[(
        "UPSTREAM_RPC_URL",
        " https://a.example/v2/KEYKEYKEY1 , http://user:pw@10.0.0.2:8545/ ",
    )])
    .unwrap();
    assert_eq!(c.upstream_urls.len(), 2);
    assert_eq!(c.upstream_url, "https://a.example/v2/KEYKEYKEY1");
    assert_eq!(c.upstream_name(0), "#1 a.example");
    assert_eq!(c.upstream_name(1), "#2 10.0.0.2:8545");
    let red = c.redact("KEYKEYKEY1 at a.example, pw at http://user:pw@10.0.0.2:8545/");
    assert!(
        !red.contains("KEYKEYKEY1") && !red.contains("10.0.0.2"),
        "{red}"
    );
    assert!(!c.send_broadcast);
    let all = config(&[
        ("UPSTREAM_RPC_URL", "http://a,http://b"),
        ("SEND_BROADCAST", "all"),
    ]);
    assert!(all.unwrap().send_broadcast);
    assert_eq!(
        config(&[("UPSTREAM_RPC_URL", "http://a,ftp://b")])
            .unwrap_err()
            .name,
        "UPSTREAM_RPC_URL"
    );
    assert_eq!(
        config(&[("UPSTREAM_RPC_URL", "http://a"), ("SEND_BROADCAST", "some")])
            .unwrap_err()
            .name,
        "SEND_BROADCAST"
    );
}

#[test]
fn upstream_pool_and_its_replacement_default_by_chain() {
    let auto = config(&[("UPSTREAM_RPC_URL", "http://x")]).unwrap();
    for (chain, pool, replacement) in [
        (Some(1), PoolKind::Mempool, ReplacementPolicy::Forward),
        (Some(295), PoolKind::Strict, ReplacementPolicy::Reject),
        (Some(298), PoolKind::Strict, ReplacementPolicy::Reject),
        (Some(299), PoolKind::Mempool, ReplacementPolicy::Forward),
        (None, PoolKind::Mempool, ReplacementPolicy::Forward),
    ] {
        let s = auto.sender_settings(chain);
        assert_eq!((s.pool, s.replacement), (pool, replacement), "{chain:?}");
    }
    let hedera = config(&[("UPSTREAM_RPC_URL", "http://x"), ("CHAIN_ID", "296")]).unwrap();
    assert_eq!(hedera.sender_settings(None).pool, PoolKind::Strict);
    let strict_forward = config(&[
        ("UPSTREAM_RPC_URL", "http://x"),
        ("UPSTREAM_POOL", "strict"),
        ("REPLACEMENT_POLICY", "forward"),
    ])
    .unwrap();
    let s = strict_forward.sender_settings(Some(1));
    assert_eq!(
        (s.pool, s.replacement),
        (PoolKind::Strict, ReplacementPolicy::Forward)
    );
    let mempool = config(&[
        ("UPSTREAM_RPC_URL", "http://x"),
        ("UPSTREAM_POOL", "mempool"),
    ]);
    assert_eq!(
        mempool.unwrap().sender_settings(Some(295)).pool,
        PoolKind::Mempool
    );
    // Known only from a chain id or UPSTREAM_POOL (issue 32, point 1): never a guess.
    assert_eq!(auto.known_pool_kind(None), None);
    assert_eq!(auto.known_pool_kind(Some(296)), Some(PoolKind::Strict));
    assert_eq!(auto.known_pool_kind(Some(1)), Some(PoolKind::Mempool));
    assert_eq!(hedera.known_pool_kind(None), Some(PoolKind::Strict));
    assert_eq!(strict_forward.known_pool_kind(None), Some(PoolKind::Strict));
    let forks = |v| {
        config(&[("UPSTREAM_RPC_URL", "http://x"), ("HARDFORK", v)])
            .unwrap()
            .hardfork
    };
    assert_eq!(forks("none"), None);
    assert_eq!(forks("Cancun"), Some(Hardfork::Cancun));
}

#[test]
fn redacts_keys_in_the_path_and_query_and_leaves_other_text_alone() {
    let c = config(&[(
        "UPSTREAM_RPC_URL",
        "https://eth.node.example/v2/Ab12Cd34Ef56?apikey=Zz9Yy8Xx7&x=1",
    )])
    .unwrap();
    let red = c.redact("invalid key Ab12Cd34Ef56 (Zz9Yy8Xx7) at eth.node.example:443");
    assert_eq!(red, "invalid key [upstream] ([upstream]) at [upstream]:443");
    assert!(matches!(
        c.redact_cow("nothing here: /v2/ 1"),
        std::borrow::Cow::Borrowed(_)
    ));
}

#[test]
fn redacts_the_upstream() {
    let c = config(&[(
        "UPSTREAM_RPC_URL",
        "https://user:pw@rpc.node.example/v1/secretkey",
    )])
    .unwrap();
    let msg =
        "fetch to https://user:pw@rpc.node.example/v1/secretkey failed: rpc.node.example refused";
    let red = c.redact(msg);
    assert!(
        !red.contains("secretkey") && !red.contains("rpc.node.example"),
        "{red}"
    );
}

#[test]
fn websocket_settings_default_to_the_http_upstreams_and_are_redacted() {
    let c = config(&[(
        "UPSTREAM_RPC_URL",
        "https://a.example/v3/KEYKEYKEY1,http://10.0.0.2:8545",
    )])
    .unwrap();
    assert_eq!(
        c.upstream_ws_urls,
        ["wss://a.example/v3/KEYKEYKEY1", "ws://10.0.0.2:8545"]
    );
    assert_eq!(c.socket, SocketLimits::default());
    assert_eq!(c.socket.idle_timeout_ms, 600_000);
    let c = config(&[
        ("UPSTREAM_RPC_URL", "http://127.0.0.1:8545"),
        ("UPSTREAM_WS_URL", "wss://ws.example/ws/SECRETSECRET"),
        ("WS_MAX_SUBSCRIPTIONS", "2"),
        ("WS_MAX_MESSAGE_BYTES", "1000"),
        ("WS_IDLE_TIMEOUT_S", "90"),
        ("WS_UPSTREAM_RECONNECT_MS", "5000"),
        ("WS_MAX_CONNECTION_BYTES", "65536"),
        ("WS_MAX_ISOLATE_BYTES", "1048576"),
    ])
    .unwrap();
    assert_eq!(c.upstream_ws_urls, ["wss://ws.example/ws/SECRETSECRET"]);
    assert_eq!(
        c.socket,
        SocketLimits {
            max_subscriptions: 2,
            max_message_bytes: 1000,
            idle_timeout_ms: 90_000,
            upstream_reconnect_ms: 5000,
            max_connection_bytes: 65_536,
            max_isolate_bytes: 1 << 20,
        }
    );
    let red = c.redact("connect to wss://ws.example/ws/SECRETSECRET failed");
    assert!(
        !red.contains("SECRETSECRET") && !red.contains("ws.example"),
        "{red}"
    );
    assert_eq!(
        config(&[
            ("UPSTREAM_RPC_URL", "http://a"),
            ("UPSTREAM_WS_URL", "http://a")
        ])
        .unwrap_err()
        .name,
        "UPSTREAM_WS_URL"
    );
}

#[test]
fn the_send_window_is_one_to_sixty_four_and_one_under_strict() {
    let with = |pool: &str, window: Option<&str>| {
        let mut vars = vec![("UPSTREAM_RPC_URL", "http://x"), ("UPSTREAM_POOL", pool)];
        if let Some(w) = window {
            vars.push(("SEND_WINDOW", w));
        }
        config(&vars).map(|c| c.sender_settings(None).window())
    };
    assert_eq!(with("mempool", None), Ok(16));
    assert_eq!(with("mempool", Some("1")), Ok(1));
    assert_eq!(with("mempool", Some("64")), Ok(64));
    assert_eq!(
        with("strict", Some("16")),
        Ok(1),
        "a strict upstream: one at a time"
    );
    for bad in ["0", "65", "-1", "many"] {
        assert_eq!(
            with("mempool", Some(bad)).map_err(|e| e.name),
            Err("SEND_WINDOW"),
            "{bad}"
        );
    }
}

#[test]
fn a_private_send_route_takes_the_sends_alone_and_is_redacted() {
    let public = config(&[("UPSTREAM_RPC_URL", "http://read.example")]).unwrap();
    assert!(!public.private_route());
    assert_eq!(public.upstreams(UpstreamSet::Send), ["http://read.example"]);
    assert!(!public.sender_settings(Some(1)).private_route);
    let c = config(&[
        ("UPSTREAM_RPC_URL", "http://read.example"),
        (
            "UPSTREAM_SEND_URL",
            "https://rpc.route.example/fast?key=SECRETKEY1, https://b.example",
        ),
    ])
    .unwrap();
    assert!(c.private_route());
    assert_eq!(
        c.upstreams(UpstreamSet::Send),
        [
            "https://rpc.route.example/fast?key=SECRETKEY1",
            "https://b.example"
        ]
    );
    assert_eq!(c.upstreams(UpstreamSet::Rpc), ["http://read.example"]);
    let settings = c.sender_settings(Some(1));
    assert!(settings.private_route);
    assert_eq!(settings.window(), 1, "one at a time behind a private route");
    assert_eq!(
        c.upstream_label("https://b.example"),
        "send#2 b.example",
        "named by its place and host"
    );
    assert_eq!(c.upstream_label("http://read.example"), "#1 read.example");
    let red = c.redact("SECRETKEY1 at https://rpc.route.example/fast?key=SECRETKEY1");
    assert!(!red.contains("SECRETKEY1"), "{red}");
    assert_eq!(
        config(&[
            ("UPSTREAM_RPC_URL", "http://a"),
            ("UPSTREAM_SEND_URL", "ws://route")
        ])
        .unwrap_err()
        .name,
        "UPSTREAM_SEND_URL"
    );
}

/// A private route and its status URL are HTTPS (what goes there must reach the route alone,
/// unread on the way); plain HTTP only to a loopback host, for tests.
#[test]
fn a_private_routes_urls_are_https_or_loopback() {
    let route = |send: &str, status: &str| {
        let mut vars = vec![
            ("UPSTREAM_RPC_URL", "http://read.example"),
            ("UPSTREAM_SEND_URL", send),
        ];
        if !status.is_empty() {
            vars.push(("SEND_STATUS_URL", status));
        }
        config(&vars).map(|_| ()).map_err(|e| e.name)
    };
    for ok in [
        "https://route.example",
        "http://127.0.0.1:8545",
        "http://localhost:9000/rpc",
        "http://[::1]:8545",
        "http://localhost",
    ] {
        assert_eq!(route(ok, ""), Ok(()), "{ok}");
    }
    for refused in [
        "http://route.example",
        "http://localhost.evil.example",
        "http://127.0.0.1@evil.example/",
        "https://route.example, http://route.example",
    ] {
        assert_eq!(route(refused, ""), Err("UPSTREAM_SEND_URL"), "{refused}");
    }
    assert_eq!(
        route("https://r.example", "https://s.example/tx/{hash}"),
        Ok(())
    );
    assert_eq!(
        route("https://r.example", "http://127.0.0.1:1/tx/{hash}"),
        Ok(())
    );
    assert_eq!(
        route("https://r.example", "http://status.example/tx/{hash}"),
        Err("SEND_STATUS_URL")
    );
}

#[test]
fn the_routes_status_url_and_public_fallback_need_the_route_and_are_checked() {
    let route = [
        ("UPSTREAM_RPC_URL", "http://read.example"),
        ("UPSTREAM_SEND_URL", "https://route.example"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut vars = route.to_vec();
        vars.extend_from_slice(extra);
        config(&vars)
    };
    let c = with(&[
        (
            "SEND_STATUS_URL",
            "https://status.example/transaction/{hash}?key=STATUSKEY9",
        ),
        ("SEND_PUBLIC_AFTER_BLOCKS", "25"),
    ])
    .unwrap();
    let settings = c.sender_settings(Some(1));
    assert!(settings.route_status);
    assert_eq!(settings.public_after_blocks, Some(25));
    // Its key is never shown; the words of its path are (redacting "transaction" from the
    // upstreams' answers would change what the relay reads in them).
    let red = c.redact("STATUSKEY9 status.example: transaction underpriced");
    assert_eq!(red, "[upstream] [upstream]: transaction underpriced");
    let unset = with(&[]).unwrap().sender_settings(Some(1));
    assert!(!unset.route_status);
    assert_eq!(unset.public_after_blocks, None);
    for (vars, name) in [
        (
            vec![("SEND_STATUS_URL", "https://status.example/tx/")],
            "SEND_STATUS_URL",
        ),
        (
            vec![("SEND_STATUS_URL", "ftp://status.example/{hash}")],
            "SEND_STATUS_URL",
        ),
        (
            vec![("SEND_PUBLIC_AFTER_BLOCKS", "0")],
            "SEND_PUBLIC_AFTER_BLOCKS",
        ),
        (
            vec![("SEND_PUBLIC_AFTER_BLOCKS", "soon")],
            "SEND_PUBLIC_AFTER_BLOCKS",
        ),
    ] {
        assert_eq!(with(&vars).unwrap_err().name, name, "{vars:?}");
    }
    // Without a private route they mean nothing: an error, not a silent no-op.
    for (name, value) in [
        ("SEND_STATUS_URL", "https://status.example/tx/{hash}"),
        ("SEND_PUBLIC_AFTER_BLOCKS", "5"),
    ] {
        let err =
            config(&[("UPSTREAM_RPC_URL", "http://read.example"), (name, value)]).unwrap_err();
        assert_eq!(err.name, name);
        assert!(err.problem.contains("UPSTREAM_SEND_URL"), "{}", err.problem);
    }
}

/// Several routes, each with its own status URL (issue 41): `SEND_STATUS_URL` lists one per route
/// of `UPSTREAM_SEND_URL`, in order, an empty entry for a route without one; another count is a
/// configuration error naming the setting. Every one's key is redacted.
#[test]
fn each_route_has_its_own_status_url() {
    let two = |status: &'static str| {
        config(&[
            ("UPSTREAM_RPC_URL", "http://read.example"),
            ("UPSTREAM_SEND_URL", "https://a.example, https://b.example"),
            ("SEND_STATUS_URL", status),
        ])
    };
    let c = two("https://a.example/tx/{hash}?k=AKEY1234, https://b.example/s/{hash}?k=BKEY5678")
        .unwrap();
    assert_eq!(
        c.send_status_urls,
        [
            Some("https://a.example/tx/{hash}?k=AKEY1234".to_string()),
            Some("https://b.example/s/{hash}?k=BKEY5678".to_string())
        ]
    );
    assert!(c.route_status());
    assert!(!c.redact("AKEY1234 BKEY5678").contains("KEY"));
    let c = two(", https://b.example/s/{hash}").unwrap();
    assert_eq!(c.send_status_urls[0], None);
    assert!(c.route_status());
    let err = two("https://a.example/tx/{hash}").unwrap_err();
    assert_eq!(err.name, "SEND_STATUS_URL");
    assert!(
        err.problem.contains("1 status URLs for 2 routes"),
        "{}",
        err.problem
    );
    assert_eq!(
        two("https://a.example/tx/{hash}, http://b.example/{hash}")
            .unwrap_err()
            .name,
        "SEND_STATUS_URL"
    );
}

/// The names `from_lookup` asks for, with every variable set to a valid value.
fn names_read() -> Vec<String> {
    let asked = std::cell::RefCell::new(Vec::new());
    chains::Chains::from_lookup(|name| {
        asked.borrow_mut().push(name.to_string());
        match name {
            "UPSTREAM_RPC_URL" => Some("https://node.example/key".into()),
            "UPSTREAM_SEND_URL" => Some("https://route.example".into()),
            _ => None,
        }
    })
    .unwrap();
    let mut names = asked.into_inner();
    names.sort();
    names.dedup();
    names
}

#[test]
fn every_setting_read_is_in_the_table_and_every_one_in_the_table_is_read() {
    let mut table: Vec<String> = settings::SETTINGS
        .iter()
        .map(|s| s.name.to_string())
        .collect();
    table.sort();
    let unique = table.len();
    table.dedup();
    assert_eq!(table.len(), unique, "a name twice in SETTINGS");
    assert_eq!(names_read(), table);
}

/// The README's settings table: (name, secret, default column, per chain column) per row, in
/// order.
fn readme_rows() -> Vec<(String, bool, String, String)> {
    let readme = include_str!("../../README.md");
    let table = &readme[readme.find("## Settings").expect("a Settings section")..];
    let table = &table[table
        .find("| name | default | per chain | meaning |")
        .expect("its table")..];
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split(" | ").collect();
            let first = cells[0].trim_start_matches("| ");
            let name = first.split('`').nth(1).expect("a name in backticks");
            (
                name.to_string(),
                first.ends_with("(secret)"),
                cells[1].to_string(),
                cells[2].to_string(),
            )
        })
        .collect()
}

#[test]
fn the_readme_settings_table_lists_exactly_the_settings_with_their_defaults() {
    let rows = readme_rows();
    let table: Vec<(String, bool, String, String)> = settings::SETTINGS
        .iter()
        .map(|s| {
            let scope = match s.scope {
                settings::Scope::Deployment => "no",
                settings::Scope::Chain => "yes",
                settings::Scope::ChainOwn => "own",
            };
            (
                s.name.to_string(),
                s.secret,
                s.default.to_string(),
                scope.to_string(),
            )
        })
        .collect();
    assert_eq!(rows, table);
}

#[test]
fn wrangler_toml_sets_every_setting_to_its_default_and_names_every_secret() {
    let toml = include_str!("../../wrangler.toml");
    let vars = &toml[toml.find("[vars]").expect("[vars]")..];
    let vars = &vars[..vars[1..].find("\n[").map_or(vars.len(), |i| i + 1)];
    let set: Vec<(&str, &str)> = vars
        .lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
        .collect();
    let comments: String = toml.lines().filter(|l| l.starts_with('#')).collect();
    for about in settings::SETTINGS {
        let in_vars = set.iter().find(|(k, _)| *k == about.name);
        if about.secret {
            assert!(in_vars.is_none(), "{} is a secret, not a var", about.name);
            assert!(
                comments.contains(about.name),
                "{} named as a secret",
                about.name
            );
            continue;
        }
        let (_, value) = in_vars.unwrap_or_else(|| panic!("{} in [vars]", about.name));
        // A default that is one literal (`30000`) is the var's value; any other is unset.
        let literal = about
            .default
            .strip_prefix('`')
            .and_then(|d| d.strip_suffix('`'))
            .filter(|d| !d.contains('`'));
        assert_eq!(*value, literal.unwrap_or(""), "{} in [vars]", about.name);
    }
    for (name, _) in set {
        assert!(
            settings::SETTINGS.iter().any(|s| s.name == name),
            "[vars] {name} is a setting"
        );
    }
}
