//! Abuse limits that live in one replica's memory (deliberately: they need no Redis round trip
//! and fail open to nothing): per-tenant create rate (governor token buckets) and a per-address
//! brake on wrong review tokens. Connection, body, header and parked-await limits are enforced
//! where those resources live (`server`, `api`, `wake`).
//!
//! Review tokens carry 256 bits, so guessing is hopeless anyway; the brake makes trying
//! expensive and visible (`elicitd_review_token_failures_total`): past `failures_per_min`
//! unknown tokens from one address within a minute, that address is braked for a minute —
//! its review requests are then looked up at most [`BRAKED_LOOKUPS_PER_SEC`] per second and
//! refused (`rate_limited`) beyond that. A braked address is throttled, not locked out: many
//! reviewers share one NAT address, and a valid link must keep working for them while someone
//! behind the same address mistypes (or scans) links.

use std::{
    collections::HashMap,
    net::IpAddr,
    num::NonZeroU32,
    sync::Mutex,
    time::{Duration, Instant},
};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::{error::Error, model::Tenant};

/// The client address of a connection (set by the server for every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// How long an address stays braked after too many wrong review tokens.
const BRAKE: Duration = Duration::from_secs(60);

/// Review lookups a braked address still gets per second (burst: twice that).
pub const BRAKED_LOOKUPS_PER_SEC: u32 = 2;

/// Per-replica limiters.
pub struct Limits {
    create: Option<DefaultKeyedRateLimiter<Tenant>>,
    review_failures: Option<DefaultKeyedRateLimiter<IpAddr>>,
    braked: Mutex<HashMap<IpAddr, Instant>>,
    braked_lookups: DefaultKeyedRateLimiter<IpAddr>,
}

impl Limits {
    /// `create_per_sec` 0 disables the create limit (burst is twice the rate);
    /// `review_failures_per_min` 0 disables the review brake.
    pub fn new(create_per_sec: u32, review_failures_per_min: u32) -> Self {
        Limits {
            create: NonZeroU32::new(create_per_sec).map(|rate| {
                let burst = NonZeroU32::new(create_per_sec.saturating_mul(2)).unwrap_or(rate);
                RateLimiter::keyed(Quota::per_second(rate).allow_burst(burst))
            }),
            review_failures: NonZeroU32::new(review_failures_per_min)
                .map(|n| RateLimiter::keyed(Quota::per_minute(n))),
            braked: Mutex::new(HashMap::new()),
            braked_lookups: RateLimiter::keyed(
                Quota::per_second(
                    NonZeroU32::new(BRAKED_LOOKUPS_PER_SEC).unwrap_or(NonZeroU32::MIN),
                )
                .allow_burst(
                    NonZeroU32::new(BRAKED_LOOKUPS_PER_SEC * 2).unwrap_or(NonZeroU32::MIN),
                ),
            ),
        }
    }

    /// Take one create from the tenant's bucket.
    pub fn check_create(&self, tenant: &Tenant) -> Result<(), Error> {
        match &self.create {
            Some(l) if l.check_key(tenant).is_err() => Err(Error::rate_limited(
                "too many creates for this tenant; slow down and retry shortly",
                1,
            )),
            _ => Ok(()),
        }
    }

    /// Throttle review lookups from a braked address (see module docs).
    pub fn check_review(&self, client: Option<IpAddr>) -> Result<(), Error> {
        let Some(ip) = client else { return Ok(()) };
        let mut braked = self.lock();
        match braked.get(&ip) {
            Some(until) if *until > Instant::now() => {
                drop(braked);
                if self.braked_lookups.check_key(&ip).is_ok() {
                    Ok(())
                } else {
                    Err(Error::rate_limited(
                        "too many invalid review links from this address; slow down",
                        1,
                    ))
                }
            }
            Some(_) => {
                braked.remove(&ip);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Count a wrong review token from `client`; brake the address when over the quota.
    pub fn review_failed(&self, client: Option<IpAddr>) {
        let (Some(ip), Some(l)) = (client, &self.review_failures) else {
            return;
        };
        if l.check_key(&ip).is_err() {
            let mut braked = self.lock();
            // Bound the map: forget expired brakes when it grows.
            if braked.len() > 10_000 {
                let now = Instant::now();
                braked.retain(|_, until| *until > now);
            }
            braked.insert(ip, Instant::now() + BRAKE);
        }
        if l.len() > 100_000 {
            l.retain_recent();
            self.braked_lookups.retain_recent();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.braked.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_bucket_refills_per_tenant() {
        let l = Limits::new(1, 0);
        let a = Tenant::new("a").unwrap();
        let b = Tenant::new("b").unwrap();
        assert!(l.check_create(&a).is_ok());
        assert!(l.check_create(&a).is_ok()); // burst 2
        assert_eq!(l.check_create(&a).unwrap_err().code(), "rate_limited");
        assert!(l.check_create(&b).is_ok(), "tenants are independent");
        assert!(Limits::new(0, 0).check_create(&a).is_ok());
    }

    #[test]
    fn review_brake_engages_per_address() {
        let l = Limits::new(0, 2);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for _ in 0..2 {
            l.review_failed(Some(ip));
            assert!(l.check_review(Some(ip)).is_ok());
        }
        l.review_failed(Some(ip));
        // Braked: still a few lookups a second (a valid link keeps working), then refused.
        let allowed = (0..20).filter(|_| l.check_review(Some(ip)).is_ok()).count();
        assert_eq!(allowed, (BRAKED_LOOKUPS_PER_SEC * 2) as usize, "the burst");
        assert_eq!(l.check_review(Some(ip)).unwrap_err().code(), "rate_limited");
        assert!(l.check_review(Some(other)).is_ok());
        assert!(l.check_review(None).is_ok());
    }
}
