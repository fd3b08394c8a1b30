//! Races: concurrent decide/decide/cancel on one id have exactly one winner, across replicas.

use serde_json::json;

use crate::{
    every_store,
    harness::{Fixture, StoreKind},
};

every_store!(one_winner_per_race);

async fn one_winner_per_race(kind: StoreKind) {
    let f = Fixture::new(kind, 2).await;
    for round in 0..25 {
        let c = f.acme().approval().await;
        let mut tasks = Vec::new();
        for i in 0..6 {
            let api = if i % 2 == 0 { f.acme() } else { f.other() };
            let token = c.token.clone();
            let id = c.id.clone();
            tasks.push(tokio::spawn(async move {
                match i % 3 {
                    0 => (
                        "submit",
                        api.decide(&token, json!({"decision": "submitted"})).await,
                    ),
                    1 => (
                        "decline",
                        api.decide(&token, json!({"decision": "declined"})).await,
                    ),
                    _ => ("cancel", api.cancel(&id).await),
                }
            }));
        }
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        let final_status = f.acme().status_of(&c.id).await;
        let decide_wins: Vec<_> = outcomes
            .iter()
            .filter(|(op, r)| *op != "cancel" && r.status == 200)
            .collect();
        let cancel_wins = outcomes
            .iter()
            .filter(|(op, r)| *op == "cancel" && r.status == 200)
            .count();
        for (op, r) in &outcomes {
            assert!(
                r.status == 200 || r.status == 409,
                "round {round} {op}: {}",
                r.body
            );
            if r.status == 409 {
                assert!(
                    ["already_decided", "canceled"].contains(&r.code()),
                    "{}",
                    r.body
                );
            }
        }
        match final_status.as_str() {
            "canceled" => {
                assert!(
                    decide_wins.is_empty(),
                    "round {round}: decided and canceled"
                );
                assert!(cancel_wins >= 1);
            }
            s @ ("submitted" | "declined") => {
                assert_eq!(
                    decide_wins.len(),
                    1,
                    "round {round}: {} decide winners",
                    decide_wins.len()
                );
                assert_eq!(decide_wins[0].1.str("status"), s);
                assert_eq!(cancel_wins, 0, "round {round}: cancel won after a decision");
            }
            other => panic!("round {round}: unexpected final status {other}"),
        }
        // The audit agrees: exactly one transition recorded.
        let events = f.acme().audit(&c.id).await.body["events"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(events, 2, "round {round}");
    }
}
