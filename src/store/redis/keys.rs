//! Redis key names. Every key of one elicitation carries the hash tag `{<id>}` so that each
//! script touches one slot (Redis Cluster ready); the record key doubles as its pub/sub channel.

use crate::model::{ElicitationId, Tenant};

/// Builds key names under one prefix.
#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        Keys {
            prefix: prefix.to_string(),
        }
    }
    /// The record hash; also the shard channel its transitions publish on.
    pub fn record(&self, id: ElicitationId) -> String {
        format!("{}:e:{{{id}}}", self.prefix)
    }
    /// The audit list.
    pub fn audit(&self, id: ElicitationId) -> String {
        format!("{}:e:{{{id}}}:audit", self.prefix)
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
        let rest = channel.strip_prefix(&self.prefix)?.strip_prefix(":e:{")?;
        ElicitationId::parse(rest.strip_suffix('}')?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_the_hash_tag_and_round_trip() {
        let k = Keys::new("p");
        let id = ElicitationId::random();
        assert_eq!(k.record(id), format!("p:e:{{{id}}}"));
        assert!(k.audit(id).starts_with(&k.record(id)));
        assert_eq!(k.id_of_channel(&k.record(id)), Some(id));
        assert_eq!(k.id_of_channel("other:e:{x}"), None);
    }
}
