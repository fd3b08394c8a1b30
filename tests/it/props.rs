//! Property tests: the validators never panic and accept exactly what their schema allows; and
//! random operation sequences give the same answers on the memory store, the Redis store and a
//! reference model of SPEC §2 at every step.

use std::sync::Arc;

use elicitd::{
    kinds::{validate_create, Bounds, CreateRequest, DecisionInput, Kind},
    model::{schema::RequestedSchema, Tenant},
    service::Service,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

use crate::harness::{test_config, RedisServer};

const BOUNDS: Bounds = Bounds {
    min_expires_secs: 10,
    max_expires_secs: 86_400,
};

// ---------------------------------------------------------------- arbitrary JSON never panics

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        prop_oneof![
            Just("string".to_string()),
            Just("number".to_string()),
            Just("integer".to_string()),
            Just("boolean".to_string()),
            Just("array".to_string()),
            Just("object".to_string()),
            Just("email".to_string()),
            Just("date-time".to_string()),
            Just("date".to_string()),
            Just("uri".to_string()),
            ".{0,12}",
        ]
        .prop_map(Value::String),
    ];
    let keys = prop_oneof![
        Just("type".to_string()),
        Just("properties".to_string()),
        Just("required".to_string()),
        Just("enum".to_string()),
        Just("oneOf".to_string()),
        Just("anyOf".to_string()),
        Just("items".to_string()),
        Just("minimum".to_string()),
        Just("maximum".to_string()),
        Just("minLength".to_string()),
        Just("maxLength".to_string()),
        Just("format".to_string()),
        Just("default".to_string()),
        Just("const".to_string()),
        Just("title".to_string()),
        Just("minItems".to_string()),
        Just("maxItems".to_string()),
        Just("$ref".to_string()),
        "[a-z]{1,6}",
    ];
    leaf.prop_recursive(5, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn schema_and_request_validation_never_panic(schema in arb_json(), values in arb_json(), body in arb_json()) {
        let _ = RequestedSchema::parse(&schema, "requestedSchema");
        let wrapped = json!({"type": "object", "properties": {"f": schema.clone()}});
        if let Ok(s) = RequestedSchema::parse(&wrapped, "requestedSchema") {
            let _ = s.validate_values(&values, true);
            let _ = s.validate_values(&json!({"f": values}), false);
        }
        let text = body.to_string();
        if let Ok(req) = serde_json::from_str::<CreateRequest>(&text) {
            for kind in [Kind::Approval, Kind::Selection, Kind::Proposal] {
                let req: CreateRequest = serde_json::from_str(&text).unwrap();
                let _ = validate_create(kind, req, BOUNDS);
            }
            drop(req);
        }
        let _ = serde_json::from_str::<DecisionInput>(&text);
    }

    #[test]
    fn raw_bytes_never_panic_the_parsers(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(req) = serde_json::from_slice::<CreateRequest>(&bytes) {
            let _ = validate_create(Kind::Approval, req, BOUNDS);
        }
        let _ = serde_json::from_slice::<DecisionInput>(&bytes);
    }
}

// ----------------------------------------------------- generated schemas accept what they allow

/// One field: its schema, a value it must accept, and a value it must refuse.
fn arb_field() -> impl Strategy<Value = (Value, Value, Value)> {
    prop_oneof![
        (0u64..5, 5u64..20).prop_flat_map(|(min, max)| {
            (Just(min), Just(max), (min as usize)..=(max as usize)).prop_map(move |(min, max, len)| {
                (
                    json!({"type": "string", "minLength": min, "maxLength": max}),
                    json!("x".repeat(len)),
                    json!("y".repeat(max as usize + 1)),
                )
            })
        }),
        (-1000i64..0, 0i64..1000).prop_flat_map(|(lo, hi)| {
            (Just(lo), Just(hi), lo..=hi).prop_map(|(lo, hi, v)| {
                (json!({"type": "integer", "minimum": lo, "maximum": hi}), json!(v), json!(hi + 1))
            })
        }),
        (1usize..6).prop_flat_map(|n| {
            (Just(n), 0..n).prop_map(|(n, pick)| {
                let opts: Vec<String> = (0..n).map(|i| format!("o{i}")).collect();
                (json!({"type": "string", "enum": opts}), json!(format!("o{pick}")), json!("nope"))
            })
        }),
        (2usize..6).prop_flat_map(|n| {
            (Just(n), 1..=n).prop_map(|(n, k)| {
                let opts: Vec<String> = (0..n).map(|i| format!("o{i}")).collect();
                let chosen: Vec<String> = opts.iter().take(k).cloned().collect();
                (
                    json!({"type": "array", "items": {"type": "string", "enum": opts}, "minItems": 1, "maxItems": n}),
                    json!(chosen),
                    json!([]),
                )
            })
        }),
        any::<bool>().prop_map(|b| (json!({"type": "boolean"}), json!(b), json!("true"))),
        Just((json!({"type": "string", "format": "email"}), json!("a@b.co"), json!("a@"))),
        Just((json!({"type": "string", "format": "date"}), json!("2024-02-29"), json!("2023-02-29"))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn generated_schemas_accept_valid_and_refuse_invalid_values(fields in prop::collection::vec(arb_field(), 1..8), bad in any::<prop::sample::Index>()) {
        let mut props = Map::new();
        let mut good = Map::new();
        for (i, (schema, ok, _)) in fields.iter().enumerate() {
            props.insert(format!("f{i}"), schema.clone());
            good.insert(format!("f{i}"), ok.clone());
        }
        let required: Vec<String> = (0..fields.len()).map(|i| format!("f{i}")).collect();
        let schema = RequestedSchema::parse(&json!({"type": "object", "properties": props, "required": required}), "s")
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert!(schema.validate_values(&Value::Object(good.clone()), true).is_ok());
        let i = bad.index(fields.len());
        let mut broken = good.clone();
        broken.insert(format!("f{i}"), fields[i].2.clone());
        let errs = schema.validate_values(&Value::Object(broken), true).unwrap_err();
        prop_assert!(errs.iter().any(|e| e.field == format!("f{i}")), "{errs:?}");
        let mut missing = good;
        missing.remove(&format!("f{i}"));
        prop_assert!(schema.validate_values(&Value::Object(missing), true).is_err());
    }
}

// ------------------------------------------- random operation sequences: model vs both stores

#[derive(Debug, Clone)]
enum Op {
    Create(Kind),
    Submit(usize),
    Decline(usize),
    InvalidDecision(usize),
    Cancel(usize),
    Result(usize),
    Status(usize),
    Audit(usize),
    OtherTenantStatus(usize),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop_oneof![Just(Kind::Approval), Just(Kind::Selection), Just(Kind::Proposal)].prop_map(Op::Create),
        2 => any::<usize>().prop_map(Op::Submit),
        1 => any::<usize>().prop_map(Op::Decline),
        1 => any::<usize>().prop_map(Op::InvalidDecision),
        2 => any::<usize>().prop_map(Op::Cancel),
        2 => any::<usize>().prop_map(Op::Result),
        1 => any::<usize>().prop_map(Op::Status),
        1 => any::<usize>().prop_map(Op::Audit),
        1 => any::<usize>().prop_map(Op::OtherTenantStatus),
    ]
}

/// SPEC §2 as a tiny reference model.
#[derive(Debug, Clone)]
struct ModelRec {
    status: &'static str,
    events: usize,
}

fn create_body(kind: Kind) -> CreateRequest {
    let v = match kind {
        Kind::Approval => json!({"message": "m", "context": {"k": 1}}),
        Kind::Selection => json!({"message": "m", "options": [{"id": "a"}, {"id": "b"}]}),
        Kind::Proposal => json!({"message": "m", "proposal": {"x": "y"}}),
    };
    serde_json::from_value(v).unwrap()
}

fn decision(kind: Kind, submit: bool, valid: bool) -> DecisionInput {
    let v = match (kind, submit, valid) {
        (_, false, true) => json!({"decision": "declined"}),
        (Kind::Approval, true, true) => json!({"decision": "submitted"}),
        (Kind::Selection, true, true) => json!({"decision": "submitted", "selectedIds": ["b"]}),
        (Kind::Proposal, true, true) => json!({"decision": "submitted", "values": {"x": "z"}}),
        (Kind::Selection, _, false) => json!({"decision": "submitted", "selectedIds": ["zz"]}),
        (_, _, false) => json!({"decision": "submitted", "selectedIds": ["a"]}),
    };
    serde_json::from_value(v).unwrap()
}

/// What one op answers: Ok(status string) or Err(code); audit answers its length.
async fn apply(
    s: &Service,
    ids: &[(String, String)],
    kinds: &[Kind],
    op: &Op,
) -> (Result<String, String>, Option<(String, String)>) {
    let acme = Tenant::new("acme").unwrap();
    let beta = Tenant::new("beta").unwrap();
    let pick = |i: usize| ids.get(i % ids.len().max(1)).cloned();
    let code = |e: elicitd::error::Error| e.code().to_string();
    match op {
        Op::Create(kind) => match s.create(&acme, *kind, create_body(*kind)).await {
            Ok(c) => {
                let token = c
                    .review_url
                    .as_deref()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string();
                (Ok("pending".into()), Some((c.elicitation_id, token)))
            }
            Err(e) => (Err(code(e)), None),
        },
        _ if ids.is_empty() => (Ok("skip".into()), None),
        Op::Submit(i) | Op::Decline(i) | Op::InvalidDecision(i) => {
            let (_, token) = pick(*i).unwrap();
            let kind = kinds[*i % ids.len()];
            let d = decision(
                kind,
                matches!(op, Op::Submit(_)),
                !matches!(op, Op::InvalidDecision(_)),
            );
            (
                s.decide(&token, d, None)
                    .await
                    .map(|o| o.status.as_str().to_string())
                    .map_err(code),
                None,
            )
        }
        Op::Cancel(i) => (
            s.cancel(&acme, &pick(*i).unwrap().0)
                .await
                .map(|o| o.status.as_str().into())
                .map_err(code),
            None,
        ),
        Op::Result(i) => (
            s.result(&acme, &pick(*i).unwrap().0)
                .await
                .map(|o| format!("{}:{}", o.status.as_str(), o.decision.as_str()))
                .map_err(code),
            None,
        ),
        Op::Status(i) => (
            s.status(&acme, &pick(*i).unwrap().0)
                .await
                .map(|o| o.status.as_str().into())
                .map_err(code),
            None,
        ),
        Op::Audit(i) => (
            s.audit(&acme, &pick(*i).unwrap().0)
                .await
                .map(|o| o.events.len().to_string())
                .map_err(code),
            None,
        ),
        Op::OtherTenantStatus(i) => (
            s.status(&beta, &pick(*i).unwrap().0)
                .await
                .map(|o| o.status.as_str().into())
                .map_err(code),
            None,
        ),
    }
}

/// The model's answer for `op` on record `i`, updating the model.
fn model_apply(m: &mut [ModelRec], op: &Op) -> Result<String, String> {
    if m.is_empty() {
        return Ok("skip".into());
    }
    let n = m.len();
    let err = |c: &str| Err(c.to_string());
    match op {
        Op::Create(_) => unreachable!(),
        Op::Submit(i) | Op::Decline(i) | Op::InvalidDecision(i) => {
            let r = &mut m[*i % n];
            match r.status {
                "pending" => {}
                "canceled" => return err("canceled"),
                _ => return err("already_decided"),
            }
            match op {
                Op::InvalidDecision(_) => err("invalid_request"),
                Op::Submit(_) => {
                    r.status = "submitted";
                    r.events += 1;
                    Ok("submitted".into())
                }
                _ => {
                    r.status = "declined";
                    r.events += 1;
                    Ok("declined".into())
                }
            }
        }
        Op::Cancel(i) => {
            let r = &mut m[*i % n];
            match r.status {
                "pending" => {
                    r.status = "canceled";
                    r.events += 1;
                    Ok("canceled".into())
                }
                "canceled" => Ok("canceled".into()),
                _ => err("already_decided"),
            }
        }
        Op::Result(i) => {
            let r = &mut m[*i % n];
            let decision = match r.status {
                "pending" => return err("not_decided"),
                "canceled" => return err("canceled"),
                "consumed:submitted" | "submitted" => "submitted",
                _ => "declined",
            };
            r.status = if decision == "submitted" {
                "consumed:submitted"
            } else {
                "consumed:declined"
            };
            r.events += 1;
            Ok(format!("consumed:{decision}"))
        }
        Op::Status(i) => Ok(m[*i % n].status.split(':').next().unwrap().to_string()),
        Op::Audit(i) => Ok(m[*i % n].events.to_string()),
        Op::OtherTenantStatus(_) => err("not_found"),
    }
}

#[test]
fn random_operation_sequences_agree_on_model_memory_and_redis() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis = RedisServer::start();
    let (memory, on_redis) = rt.block_on(async {
        let m = elicitd::server::build(test_config(None, "prop"))
            .await
            .unwrap();
        let r = elicitd::server::build(test_config(Some(redis.url()), "prop"))
            .await
            .unwrap();
        (Arc::new(m), Arc::new(r))
    });
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 48,
        ..ProptestConfig::default()
    });
    runner
        .run(&prop::collection::vec(arb_op(), 1..40), |ops| {
            rt.block_on(async {
                let mut model: Vec<ModelRec> = Vec::new();
                let mut kinds = Vec::new();
                let (mut ids_m, mut ids_r) = (Vec::new(), Vec::new());
                for (step, op) in ops.iter().enumerate() {
                    let (am, new_m) = apply(&memory, &ids_m, &kinds, op).await;
                    let (ar, new_r) = apply(&on_redis, &ids_r, &kinds, op).await;
                    let expected = match op {
                        Op::Create(kind) => {
                            model.push(ModelRec {
                                status: "pending",
                                events: 1,
                            });
                            kinds.push(*kind);
                            Ok("pending".to_string())
                        }
                        _ => model_apply(&mut model, op),
                    };
                    prop_assert_eq!(&am, &expected, "memory, step {} {:?}", step, op);
                    prop_assert_eq!(&ar, &expected, "redis, step {} {:?}", step, op);
                    ids_m.extend(new_m);
                    ids_r.extend(new_r);
                }
                Ok(())
            })
        })
        .unwrap();
}
