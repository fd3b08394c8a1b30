//! A fleet mid-upgrade from 0.1: replicas that write records in 0.1's layout
//! (`ELICITD_LEGACY_RECORDS=true`: review links of the first form found through the review
//! index, the audit list started by the create) beside replicas that write the current one
//! (links that carry the id, no index, the `created` entry kept by the record). Every replica
//! opens, decides, replays, audits and notifies every record, and a link keeps the form its
//! record was made with.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use crate::{
    harness::{Api, Fixture, StoreKind},
    review_page::get_page,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_and_current_records_work_on_every_replica() {
    mixed_fleet(StoreKind::Redis).await;
}

/// On a Cluster the legacy review index lives in other slots than the record (written before
/// the create script, on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_and_current_records_work_on_every_replica_on_cluster() {
    mixed_fleet(StoreKind::Cluster).await;
}

fn token_of(url: &str) -> String {
    url.rsplit('/').next().unwrap_or_default().to_string()
}

async fn trail(api: &Api, id: &str) -> Vec<String> {
    let r = api.get(&format!("/v1/elicitations/{id}/audit")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

async fn mixed_fleet(kind: StoreKind) {
    let nth = AtomicUsize::new(0);
    let f = Fixture::with(kind, 2, |c| {
        c.legacy_records = nth.fetch_add(1, Ordering::Relaxed) == 0;
    })
    .await;
    let (legacy, current) = (f.acme(), f.other());
    for (maker, other, len) in [(&legacy, &current, 43), (&current, &legacy, 65)] {
        let body =
            json!({"message": "m", "context": {"n": len}, "idempotencyKey": format!("k{len}")});
        let r = maker.post("/v1/approvals", &body).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let (id, token) = (
            r.str("elicitationId").to_string(),
            token_of(r.str("reviewUrl")),
        );
        assert_eq!(token.len(), len, "{}", r.body);
        // A replay through the other replica rebuilds the same link (in the record's form).
        let again = other.post("/v1/approvals", &body).await;
        assert_eq!(again.status, 201, "{}", again.body);
        assert_eq!(token_of(again.str("reviewUrl")), token, "{}", again.body);
        // The page opens on both replicas, a decision goes through the other one.
        for api in [maker, other] {
            assert_eq!(get_page(api, &token).await.status, 200, "len {len}");
        }
        let d = other.decide(&token, json!({"decision": "submitted"})).await;
        assert_eq!(d.status, 200, "{}", d.body);
        assert_eq!(maker.result(&id).await.status, 200);
        for api in [maker, other] {
            assert_eq!(
                trail(api, &id).await,
                ["created", "viewed", "viewed", "decided", "fetched"],
                "len {len}"
            );
        }
        // Named reviewers: personal links of the same form, each opening its request anywhere.
        let r = maker
            .post(
                "/v1/approvals",
                &json!({"message": "m", "context": 1,
                    "reviewers": [{"id": "alice"}, {"id": "bob"}], "quorum": 2}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let pid = r.str("elicitationId").to_string();
        let links: Vec<String> = r.body["reviewers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| token_of(x["reviewUrl"].as_str().unwrap()))
            .collect();
        for (who, t) in links.iter().enumerate() {
            assert_eq!(t.len(), len);
            let via = if who == 0 { other } else { maker };
            assert_eq!(get_page(via, t).await.status, 200);
            let d = via.decide(t, json!({"decision": "submitted"})).await;
            assert_eq!(d.status, 200, "{}", d.body);
        }
        assert_eq!(maker.status(&pid).await.str("status"), "submitted");
    }

    // A link that carries one record's id in front of another's MAC opens neither.
    let a = current.approval().await;
    let b = current.approval().await;
    assert_eq!(a.token.len(), 65);
    let forged = format!("{}{}", &b.token[..22], &a.token[22..]);
    for api in [&legacy, &current] {
        assert_eq!(get_page(api, &forged).await.status, 404);
        let d = api.decide(&forged, json!({"decision": "submitted"})).await;
        assert_eq!(d.status, 404, "{}", d.body);
        // The MAC alone (the first form) is not a link of a current record either.
        assert_eq!(get_page(api, &a.token[22..]).await.status, 404);
    }
    assert_eq!(current.status(&a.id).await.str("status"), "pending");
    assert_eq!(current.status(&b.id).await.str("status"), "pending");
}

/// Invitations carry the link in the form of their record, whichever replica's worker sends
/// them: the delivery worker rebuilds it from the salt and picks the form by the stored hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitations_carry_links_in_their_records_form() {
    use crate::harness::smtp::{link_in, SmtpSink};
    let Some(sink) = SmtpSink::start(None) else {
        return;
    };
    let smtp = sink.url(None);
    let nth = AtomicUsize::new(0);
    let f = Fixture::with(StoreKind::Redis, 2, |c| {
        c.legacy_records = nth.fetch_add(1, Ordering::Relaxed) == 0;
        let mut cli = <elicitd::config::Cli as clap::Parser>::parse_from(["elicitd"]);
        cli.smtp_url = Some(smtp.clone());
        cli.smtp_from = Some("approvals@elicitd.test".into());
        cli.api_keys = Some(format!("acme:{}", crate::harness::ACME_KEY));
        c.notify = elicitd::config::Config::from_cli(cli).unwrap().notify;
    })
    .await;
    let (legacy, current) = (f.acme(), f.other());
    for (n, (maker, len)) in [(&legacy, 43), (&current, 65)].into_iter().enumerate() {
        let c = maker
            .create(
                "approval",
                json!({"message": "m", "context": 1,
                    "notify": {"email": [format!("r{len}@example.com")]}}),
            )
            .await;
        assert_eq!(c.token.len(), len);
        let mails = sink
            .wait_for(n + 1, std::time::Duration::from_secs(10))
            .await;
        let text = mails[n].parsed().body_text(0).unwrap().to_string();
        let link = link_in(&text);
        assert!(
            link.ends_with(&format!("/review/{}", c.token)),
            "{link} vs {}",
            c.token
        );
    }
}
