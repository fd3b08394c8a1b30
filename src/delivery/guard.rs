//! Where webhooks may go. A target that resolves to loopback, private, link-local (cloud
//! metadata lives there: 169.254.169.254, fd00:ec2::254), unique-local, CGNAT, multicast or
//! unspecified addresses is refused — checked on the addresses actually connected to (our DNS
//! resolver filters them), so a name that resolves differently later (DNS rebinding) cannot slip
//! through, and redirects are never followed. `ELICITD_WEBHOOK_ALLOW_PRIVATE` turns this off.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::Arc,
};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether webhooks may connect to `ip`.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => public_v4(v4),
            None => public_v6(v6),
        },
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF 192.0.0/24
        || (a == 198 && (18..20).contains(&b)) // benchmarking 198.18/15
        || a >= 240) // reserved
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7 (incl. fd00:ec2::254)
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first == 0x2001 && ip.segments()[1] == 0x0db8) // documentation
        || (first == 0x0064 && ip.segments()[1] == 0xff9b)) // NAT64 (maps to v4 space)
}

/// The reason a URL's host is refused, when it is an IP literal that is not public (names are
/// checked when resolved).
pub fn literal_problem(url: &str, allow_private: bool) -> Option<String> {
    if allow_private {
        return None;
    }
    let host = url.parse::<http::Uri>().ok()?.host()?.to_string();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = host.parse().ok()?;
    (!is_public(ip)).then(|| format!("points to a non-public address ({ip})"))
}

/// A DNS resolver that drops non-public addresses (and fails when none is left).
#[derive(Debug, Clone)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| is_public(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(
                    format!("refused: {host} resolves only to non-public addresses").into(),
                );
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The resolver webhooks use.
pub fn resolver(allow_private: bool) -> Option<Arc<PublicOnly>> {
    (!allow_private).then(|| Arc::new(PublicOnly))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_ranges_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn literals_are_checked_names_are_left_to_the_resolver() {
        assert!(literal_problem("http://127.0.0.1:9/x", false).is_some());
        assert!(literal_problem("http://[::1]:9/x", false).is_some());
        assert!(literal_problem("http://169.254.169.254/latest", false).is_some());
        assert!(literal_problem("http://127.0.0.1:9/x", true).is_none());
        assert!(literal_problem("https://hooks.example.com/x", false).is_none());
        assert!(literal_problem("https://1.1.1.1/x", false).is_none());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_addresses() {
        let err = PublicOnly
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("non-public"), "{err}");
    }
}
