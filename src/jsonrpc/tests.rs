use super::request::go_alias;
use super::*;
use serde_json::json;

fn error_of(error: &RequestError) -> (Value, i64) {
    let v: Value = serde_json::from_str(&error.response()).unwrap();
    (v["id"].clone(), v["error"]["code"].as_i64().unwrap())
}

#[test]
fn parses_single_and_batch() {
    let Incoming::Single(Ok(req)) =
        parse(br#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}"#, 10).unwrap()
    else {
        panic!()
    };
    assert_eq!(req.id, Some(json!(7).into()));
    assert_eq!(req.method, "eth_chainId");
    let Incoming::Batch(requests) = parse(
        br#"[{"jsonrpc":"2.0","id":"a","method":"m","params":[]}, 5, {"jsonrpc":"1.0","id":2,"method":"m"}]"#,
        10,
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(requests.len(), 3);
    assert!(requests[0].is_ok());
    assert_eq!(
        error_of(requests[1].as_ref().unwrap_err()),
        (Value::Null, INVALID_REQUEST)
    );
    assert_eq!(
        error_of(requests[2].as_ref().unwrap_err()),
        (json!(2), INVALID_REQUEST)
    );
}

#[test]
fn what_goes_upstream_is_made_from_the_parsed_members_only() {
    let parse_one = |body: &str| match parse(body.as_bytes(), 10).unwrap() {
        Incoming::Single(parsed) => parsed,
        Incoming::Batch(_) => panic!(),
    };
    // Unknown members and escapes go; the method is the one the policy read.
    let req = parse_one(
        r#"{"params":[1],"method":"eth_sendRawTransactio\u006e","id":"a","jsonrpc":"2.0","x":{"y":1}}"#,
    )
    .unwrap();
    assert_eq!(req.method, "eth_sendRawTransaction");
    assert_eq!(
        req.to_json(),
        r#"{"jsonrpc":"2.0","id":"a","method":"eth_sendRawTransaction","params":[1]}"#
    );
    // A later duplicate wins, as in Go; what goes upstream has one of each.
    let req = parse_one(r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","method":"eth_call"}"#)
        .unwrap();
    assert_eq!(
        req.to_json(),
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_call"}"#
    );
    // A notification has no id; no params when there were none.
    let req = parse_one(r#"{"jsonrpc":"2.0","method":"eth_chainId"}"#).unwrap();
    assert_eq!(req.to_json(), r#"{"jsonrpc":"2.0","method":"eth_chainId"}"#);
    // A member a Go node reads as one of the four, in another case: refused.
    for (body, key) in [
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"eth_chainId","Method":"debug_setHead","params":["0x0"]}"#,
            "Method",
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"eth_sendRawTransaction","params":["0x01"],"PARAMS":["0x02"]}"#,
            "PARAMS",
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"eth_chainId\",\"param\u{17f}\":[]}",
            "param\u{17f}",
        ),
        (
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"eth_chainId\",\"Jsonrpc\":\"1.0\"}",
            "Jsonrpc",
        ),
    ] {
        let error = parse_one(body).unwrap_err();
        assert_eq!(error_of(&error), (json!(7), INVALID_REQUEST), "{body}");
        let message: Value = serde_json::from_str(&error.response()).unwrap();
        let message = message["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("{key:?}")), "{message}");
    }
    assert!(!go_alias("methods", "method") && !go_alias("method", "method"));
}

#[test]
fn body_level_errors() {
    assert_eq!(
        error_of(&parse(b"{not json", 10).unwrap_err()).1,
        PARSE_ERROR
    );
    assert_eq!(error_of(&parse(b"[]", 10).unwrap_err()).1, INVALID_REQUEST);
    assert_eq!(
        error_of(&parse(b"[1,2,3]", 2).unwrap_err()).1,
        LIMIT_EXCEEDED
    );
    let Incoming::Single(Err(e)) = parse(b"42", 10).unwrap() else {
        panic!()
    };
    assert_eq!(error_of(&e).1, INVALID_REQUEST);
}

#[test]
fn result_quantities() {
    assert_eq!(
        result_quantity(r#"{"jsonrpc":"2.0","id":1,"result":"0x7a69"}"#),
        Some(31337)
    );
    for answer in [
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":"7a69"}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":31337}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":"0x10000000000000000"}"#,
        r#"[1]"#,
        "not json",
    ] {
        assert_eq!(result_quantity(answer), None, "{answer}");
    }
}

#[test]
fn raw_transaction_params() {
    assert_eq!(
        raw_transaction_param(&json!(["0x01ff"])).unwrap(),
        vec![1, 0xff]
    );
    for bad in [
        json!([]),
        json!(["0x1", "0x2"]),
        json!([1]),
        json!(["zz"]),
        json!({}),
    ] {
        assert_eq!(
            raw_transaction_param(&bad).unwrap_err().code,
            INVALID_PARAMS
        );
    }
}

#[test]
fn answers_parse_and_render_with_any_id() {
    let ok = Answer::parse(r#"{"jsonrpc":"2.0","id":1,"result":"0xab"}"#).unwrap();
    assert_eq!(ok, Answer::Result("\"0xab\"".into()));
    assert_eq!(
        ok.render(&json!("x").into()),
        r#"{"jsonrpc":"2.0","id":"x","result":"0xab"}"#
    );
    let err = Answer::parse(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"already known"}}"#,
    )
    .unwrap();
    assert_eq!(err.error_parts(), Some((-32000, "already known".into())));
    let with_data = Answer::parse(
        r#"{"id":1,"error":{"code":-32010,"message":"rejected","data":"nonce too low"},"result":null}"#,
    )
    .unwrap();
    assert_eq!(
        with_data.error_parts().unwrap().1,
        "rejected: nonce too low"
    );
    assert_eq!(
        Answer::parse(r#"{"id":1,"result":null}"#),
        Some(Answer::Result("null".into()))
    );
    for bad in ["[]", "1", "{}", "nope", r#"[{"result":1}]"#] {
        assert_eq!(Answer::parse(bad), None, "{bad}");
    }
    assert_eq!(
        Answer::hash(&[0xab; 32]).render(&json!(7).into()),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":"0x{}"}}"#,
            "ab".repeat(32)
        )
    );
    let made = Answer::error(&RpcError::new(LIMIT_EXCEEDED, "full"));
    assert_eq!(
        made.to_wire(),
        r#"{"error":{"code":-32005,"message":"full"}}"#
    );
    assert_eq!(Answer::parse(&made.to_wire()), Some(made));
}

#[test]
fn error_responses_keep_the_id() {
    let text = RpcError::new(INVALID_INPUT, "x").response(&json!("abc").into());
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].as_i64()),
        (json!("abc"), Some(INVALID_INPUT))
    );
    assert_eq!(batch(&["1".into(), "2".into()]), "[1,2]");
}

/// Issue 32, point 8: an id beyond 64 bits (or any number) is echoed as the client wrote it, in
/// a single answer, a batch member's, an error's, and a refused request's; the upstream gets it as
/// a string, which every node takes.
#[test]
fn ids_are_echoed_exactly_whatever_their_size() {
    const BIG: &str = "12345678901234567890123";
    for id in [
        BIG,
        "-98765432109876543210",
        "1.50",
        "1e3",
        "18446744073709551616",
        "7",
    ] {
        let single = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"eth_chainId","params":[]}}"#);
        let Incoming::Single(Ok(req)) = parse(single.as_bytes(), 10).unwrap() else {
            panic!("{single}")
        };
        let want = format!(r#""id":{id},"#);
        let answered = Answer::Result("\"0x1\"".into()).render(&req.response_id());
        assert!(answered.contains(&want), "{answered}");
        let refused = RpcError::new(INVALID_INPUT, "no").response(&req.response_id());
        assert!(refused.contains(&format!(r#""id":{id}"#)), "{refused}");
        // What goes upstream: an id every node reads (anvil refuses numbers beyond 64 bits).
        let upstream: Value = serde_json::from_str(&req.to_json()).unwrap();
        match id.parse::<i64>() {
            Ok(n) => assert_eq!(upstream["id"], json!(n)),
            Err(_) => assert_eq!(upstream["id"], json!(id)),
        }
        // A batch member, and a member refused before any method ran.
        let body = format!(
            r#"[{single},{{"jsonrpc":"1.0","id":{id},"method":"m"}},{{"id":{id},"method":"m","Params":[]}}]"#
        );
        let Incoming::Batch(requests) = parse(body.as_bytes(), 10).unwrap() else {
            panic!()
        };
        for parsed in &requests[1..] {
            let text = parsed.as_ref().unwrap_err().response();
            assert!(text.contains(&format!(r#""id":{id}"#)), "{text}");
        }
        let Ok(member) = &requests[0] else { panic!() };
        assert_eq!(member.response_id(), req.response_id());
    }
    // Strings, null and a notification are as before.
    let Incoming::Single(Ok(req)) =
        parse(br#"{"jsonrpc":"2.0","id":"a\u0062","method":"m"}"#, 10).unwrap()
    else {
        panic!()
    };
    assert!(Answer::Result("1".into())
        .render(&req.response_id())
        .contains(r#""id":"a\u0062""#));
    let Incoming::Single(Err(e)) =
        parse(br#"{"jsonrpc":"2.0","id":true,"method":"m"}"#, 10).unwrap()
    else {
        panic!()
    };
    assert_eq!(error_of(&e), (Value::Null, INVALID_REQUEST));
}

#[test]
fn a_result_the_upstream_says_it_cut_short_is_an_error() {
    // Nethermind's JsonRpcResponseWriter: `_streamStatus` between `result` and `id`.
    let truncated =
        r#"{"jsonrpc":"2.0","result":[{"blockNumber":"0x1"}],"_streamStatus":"truncated","id":1}"#;
    let Some(Answer::Error(error)) = Answer::parse(truncated) else {
        panic!("a truncated result is no result");
    };
    let error: serde_json::Value = serde_json::from_str(&error).unwrap();
    assert_eq!(error["code"], LIMIT_EXCEEDED);
    assert!(error["message"]
        .as_str()
        .unwrap()
        .starts_with("Too many logs requested"));
    // Whatever the status says, the error stays JSON.
    let odd = r#"{"jsonrpc":"2.0","result":[],"_streamStatus":"tr\"un\u00e9","id":1}"#;
    let Some(Answer::Error(error)) = Answer::parse(odd) else {
        panic!("not complete: an error");
    };
    assert!(
        serde_json::from_str::<serde_json::Value>(&error).is_ok(),
        "{error}"
    );
    let complete = r#"{"jsonrpc":"2.0","result":[],"_streamStatus":"complete","id":1}"#;
    assert_eq!(Answer::parse(complete), Some(Answer::Result("[]".into())));
}
