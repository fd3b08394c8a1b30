//! Redis key names.
//!
//! Every record lives in one of [`SHARDS`] shards, picked from its id; all keys of a shard —
//! its records, their audit lists and delivery lists, the shard's delivery queue, its delivery
//! entries and its deadline index — carry the hash tag `{s<NN>}`, so they share one Redis
//! Cluster slot. That is what lets a transition script append the webhook event of the change
//! it makes (the transactional outbox) and keep the deadline index, atomically, on Cluster too;
//! the shards spread over the primaries. The record key doubles as its pub/sub channel.

use crate::model::{ElicitationId, Tenant};

/// Number of shards (hash tags). Fixed: it is part of every key name.
pub const SHARDS: u16 = 16;

/// Builds key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

/// The shard of an id (uniform: ids are random).
pub fn shard_of(id: ElicitationId) -> u16 {
    (id.as_u128() % SHARDS as u128) as u16
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_string(),
        }
    }
    fn tag(shard: u16) -> String {
        format!("{{s{shard:02}}}")
    }
    /// The record hash; also the shard channel its transitions publish on.
    pub fn record(&self, id: ElicitationId) -> String {
        format!("{}:e:{}:{id}", self.prefix, Self::tag(shard_of(id)))
    }
    /// The audit list.
    pub fn audit(&self, id: ElicitationId) -> String {
        format!("{}:audit", self.record(id))
    }
    /// The record's webhook deliveries (ids, oldest first).
    pub fn deliveries(&self, id: ElicitationId) -> String {
        format!("{}:dl", self.record(id))
    }
    /// One delivery (JSON), in the record's shard.
    pub fn delivery(&self, shard: u16, delivery_id: &str) -> String {
        format!("{}:d:{}:{delivery_id}", self.prefix, Self::tag(shard))
    }
    /// A shard's delivery queue: delivery id scored by when it is due (or its lease ends).
    pub fn due(&self, shard: u16) -> String {
        format!("{}:dq:{}", self.prefix, Self::tag(shard))
    }
    /// A shard's deadline index: ids of pending records with a webhook, scored by deadline.
    pub fn deadlines(&self, shard: u16) -> String {
        format!("{}:ex:{}", self.prefix, Self::tag(shard))
    }
    /// Review-token hash → id.
    pub fn review_index(&self, token_hash: &str) -> String {
        format!("{}:rt:{token_hash}", self.prefix)
    }
    /// Tenant + hashed idempotency key → `id|fingerprint`.
    pub fn idempotency(&self, tenant: &Tenant, key_hash: &str) -> String {
        format!("{}:idem:{{{tenant}}}:{key_hash}", self.prefix)
    }
    /// The id a channel (record key) names, if it is one of ours.
    pub fn id_of_channel(&self, channel: &str) -> Option<ElicitationId> {
        let rest = channel.strip_prefix(&self.prefix)?.strip_prefix(":e:{s")?;
        let (_, id) = rest.split_once("}:")?;
        ElicitationId::parse(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_record_share_its_shards_tag_and_round_trip() {
        let k = Keys::new("p");
        let id = ElicitationId::random();
        let s = shard_of(id);
        let tag = format!("{{s{s:02}}}");
        for key in [
            k.record(id),
            k.audit(id),
            k.deliveries(id),
            k.delivery(s, "msg_x"),
            k.due(s),
            k.deadlines(s),
        ] {
            assert!(key.contains(&tag), "{key}");
            assert_eq!(
                fred::util::redis_keyslot(key.as_bytes()),
                fred::util::redis_keyslot(k.record(id).as_bytes())
            );
        }
        assert_eq!(k.id_of_channel(&k.record(id)), Some(id));
        assert_eq!(k.id_of_channel("other:e:{s01}:x"), None);
        assert_eq!(k.id_of_channel("p:e:{s01}:nope"), None);
    }

    #[test]
    fn shards_are_used_evenly() {
        let mut counts = [0u32; SHARDS as usize];
        for _ in 0..16_000 {
            counts[shard_of(ElicitationId::random()) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (700..1300).contains(c)), "{counts:?}");
    }
}
