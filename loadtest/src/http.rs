//! The HTTP layer: one [`Conn`] per simulated client, over either hyper's bare HTTP/1.1
//! connection (default; one TCP connection per `Conn`, kept alive, reopened when the server
//! closes it) or reqwest (one shared keep-alive pool; supports `https://`).
//!
//! Both send the same bytes: method, path, `Authorization: Bearer <key>` (unless the call is a
//! reviewer decision), and a JSON body when there is one. A reply is its status and body; a
//! failure to get one is a [`Failure`] whose [`Failure::kind`] names the transport error class.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{
    client::conn::http1::{self, SendRequest},
    header, Method, Request,
};
use hyper_util::rt::TokioIo;

/// Which HTTP client library sends the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    /// hyper's HTTP/1.1 connection API: one keep-alive connection per worker (`http://` only).
    Hyper,
    /// reqwest with one shared keep-alive pool (`http://` and `https://`).
    Reqwest,
}

impl std::fmt::Display for ClientKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClientKind::Hyper => "hyper",
            ClientKind::Reqwest => "reqwest",
        })
    }
}

/// Why a request got no HTTP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Connect(String),
    Timeout,
    Io(String),
}

impl Failure {
    /// Error class used in reports (`transport: connect`, `transport: timeout`, `transport: io`).
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Connect(_) => "transport: connect",
            Failure::Timeout => "transport: timeout",
            Failure::Io(_) => "transport: io",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(e) => write!(f, "connect: {e}"),
            Failure::Timeout => f.write_str("timed out"),
            Failure::Io(e) => write!(f, "io: {e}"),
        }
    }
}

/// An HTTP reply: status and the whole body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One server base URL plus the credentials and client settings to reach it.
#[derive(Clone)]
pub struct Target {
    base: Arc<str>,
    authority: Arc<str>,
    /// Path prefix of `base` (empty or `/prefix`), prepended to every request path.
    prefix: Arc<str>,
    auth: Arc<str>,
    kind: ClientKind,
    reqwest: Option<reqwest::Client>,
}

impl Target {
    /// `base` is `http://host:port` (optionally with a path prefix; `https://` needs reqwest).
    pub fn new(base: &str, api_key: &str, kind: ClientKind) -> Result<Target, String> {
        let base = base.trim_end_matches('/');
        let rest = match (base.strip_prefix("http://"), base.strip_prefix("https://")) {
            (Some(r), _) => r,
            (None, Some(r)) if kind == ClientKind::Reqwest => r,
            (None, Some(_)) => return Err("https:// URLs need --client reqwest".into()),
            _ => return Err(format!("not an http(s) URL: {base}")),
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("no host in URL: {base}"));
        }
        let authority = if authority.contains(':') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let reqwest = match kind {
            ClientKind::Reqwest => Some(
                reqwest::Client::builder()
                    .pool_max_idle_per_host(usize::MAX)
                    .tcp_nodelay(true)
                    .build()
                    .map_err(|e| format!("reqwest client: {e}"))?,
            ),
            ClientKind::Hyper => None,
        };
        Ok(Target {
            base: base.into(),
            authority: authority.into(),
            prefix: prefix.into(),
            auth: format!("Bearer {api_key}").into(),
            kind,
            reqwest,
        })
    }

    /// The base URL without a trailing slash.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A new client handle (for hyper: its own connection, opened on first use).
    pub fn conn(&self) -> Conn {
        Conn {
            target: self.clone(),
            sender: None,
        }
    }
}

/// One simulated client. Requests on one `Conn` are sequential.
pub struct Conn {
    target: Target,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// Open the connection now (hyper only; reqwest connects on demand). Lets a scenario pace
    /// thousands of connects before it sends anything.
    pub async fn connect(&mut self) -> Result<(), Failure> {
        if self.target.kind == ClientKind::Hyper && !self.is_open() {
            self.sender = Some(self.open().await?);
        }
        Ok(())
    }

    fn is_open(&self) -> bool {
        self.sender.as_ref().is_some_and(|s| !s.is_closed())
    }

    async fn open(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        let stream = tokio::net::TcpStream::connect(&*self.target.authority)
            .await
            .map_err(|e| Failure::Connect(e.to_string()))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Failure::Connect(e.to_string()))?;
        tokio::spawn(async move {
            // Ends when the server closes the connection or the sender is dropped.
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Send one request and read the whole reply, within `timeout`.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        auth: bool,
        timeout: Duration,
    ) -> Result<Reply, Failure> {
        match tokio::time::timeout(timeout, self.send(method, path, body, auth)).await {
            Ok(r) => r,
            Err(_) => {
                // The connection may still carry the late reply: never reuse it.
                self.sender = None;
                Err(Failure::Timeout)
            }
        }
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        auth: bool,
    ) -> Result<Reply, Failure> {
        if let Some(client) = &self.target.reqwest {
            let mut rb = client.request(method, format!("{}{path}", self.target.base));
            if auth {
                rb = rb.header(header::AUTHORIZATION, &*self.target.auth);
            }
            if let Some(b) = body {
                rb = rb.header(header::CONTENT_TYPE, "application/json").body(b);
            }
            let r = rb.send().await.map_err(reqwest_failure)?;
            let status = r.status().as_u16();
            let body = r.bytes().await.map_err(reqwest_failure)?;
            return Ok(Reply { status, body });
        }
        // A kept-alive connection the server closed while idle is reopened, not an error.
        if !self.is_open() {
            self.sender = Some(self.open().await?);
        }
        let Some(sender) = self.sender.as_mut() else {
            return Err(Failure::Io("no connection".into()));
        };
        if sender.ready().await.is_err() {
            self.sender = Some(self.open().await?);
        }
        let uri = if self.target.prefix.is_empty() {
            path.to_string()
        } else {
            format!("{}{path}", self.target.prefix)
        };
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::HOST, &*self.target.authority);
        if auth {
            req = req.header(header::AUTHORIZATION, &*self.target.auth);
        }
        let req = match body {
            Some(b) => req
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(b)),
            None => req.body(Full::new(Bytes::new())),
        }
        .map_err(|e| Failure::Io(e.to_string()))?;
        let Some(sender) = self.sender.as_mut() else {
            return Err(Failure::Io("no connection".into()));
        };
        let result = async {
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>(Reply { status, body })
        }
        .await;
        result.map_err(|e| {
            self.sender = None;
            Failure::Io(e.to_string())
        })
    }
}

fn reqwest_failure(e: reqwest::Error) -> Failure {
    if e.is_timeout() {
        Failure::Timeout
    } else if e.is_connect() {
        Failure::Connect(e.to_string())
    } else {
        Failure::Io(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_their_authority() {
        let t = Target::new("http://127.0.0.1:8080/", "k", ClientKind::Hyper).unwrap();
        assert_eq!(t.base(), "http://127.0.0.1:8080");
        assert_eq!(&*t.authority, "127.0.0.1:8080");
        let t = Target::new("http://example.test", "k", ClientKind::Hyper).unwrap();
        assert_eq!(&*t.authority, "example.test:80");
        let t = Target::new("http://h:1/pre/", "k", ClientKind::Hyper).unwrap();
        assert_eq!((&*t.authority, &*t.prefix), ("h:1", "/pre"));
        assert!(Target::new("https://x:1", "k", ClientKind::Hyper).is_err());
        assert!(Target::new("ftp://x", "k", ClientKind::Reqwest).is_err());
    }
}
