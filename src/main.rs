//! The `elicitd` binary: parse config, init logging, serve HTTP (and MCP over stdio with
//! `elicitd mcp-stdio`).

use std::process::ExitCode;

use clap::Parser;
use elicitd::{
    config::{Cli, Command, Config},
    mcp::ElicitTools,
    model::Tenant,
    server,
    service::Service,
    telemetry,
};
use rmcp::ServiceExt;

/// mimalloc instead of glibc malloc: the request path allocates many small short-lived objects
/// across worker threads, where glibc's arena locks and chunk consolidation showed up as ~12 % of
/// a status-poll profile (docs/benchmarks.md). The `system-alloc` feature keeps the system
/// allocator instead, for heap profilers that hook `malloc` (heaptrack, valgrind's dhat).
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = cli.command.clone();
    let config = match Config::from_cli(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("elicitd: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init_logging(config.log_format);
    if let Some(key) = &config.generated_key {
        // Shown once, on the terminal (stderr: stdout may be the MCP stdio channel); never logged.
        eprintln!(
            "elicitd: no ELICITD_API_KEYS set; generated API key for tenant \"default\": {key}"
        );
    }
    let stdio_tenant = match &command {
        Some(Command::McpStdio { tenant }) => match stdio_tenant(&config, tenant.as_deref()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("elicitd: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let listen = config.listen;
    let metrics_listen = config.metrics_listen;
    let store_kind = if config.redis_url.is_some() {
        "redis"
    } else {
        "memory"
    };
    let service = match server::build(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("elicitd: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Stdio mode serves HTTP on the shared runtime (one local user); otherwise one worker
    // thread per core, each with its own listening socket.
    let threads = match stdio_tenant {
        Some(_) => 1,
        None => service.config().http_threads,
    };
    let listeners = match server::bind_per_core(listen, threads) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("elicitd: cannot bind {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr = listeners[0]
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(%addr, store = store_kind, threads, "elicitd listening");
    if let Some(addr) = metrics_listen {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                tracing::info!(%addr, "metrics listening");
                tokio::spawn(async move { axum::serve(l, server::metrics_router()).await });
            }
            Err(e) => {
                eprintln!("elicitd: cannot bind metrics listener {addr}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let result = match stdio_tenant {
        None => server::serve_per_core(listeners, service, server::shutdown_signal()).await,
        Some(tenant) => match listeners
            .into_iter()
            .next()
            .map(tokio::net::TcpListener::from_std)
        {
            Some(Ok(listener)) => serve_stdio(listener, service, tenant).await,
            Some(Err(e)) => Err(e),
            None => Err(std::io::Error::other("no listener")),
        },
    };
    match result {
        Ok(()) => {
            tracing::info!("elicitd stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("elicitd: server error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn stdio_tenant(config: &Config, name: Option<&str>) -> Result<Tenant, String> {
    let mut tenants: Vec<&Tenant> = config.api_keys.values().collect();
    tenants.sort_by_key(|t| t.as_str());
    tenants.dedup();
    match name {
        Some(n) => tenants
            .into_iter()
            .find(|t| t.as_str() == n)
            .cloned()
            .ok_or_else(|| format!("--tenant {n:?} is not a tenant of ELICITD_API_KEYS")),
        None if tenants.len() == 1 => Ok(tenants[0].clone()),
        None => Err("several tenants are configured: choose one with --tenant".into()),
    }
}

/// MCP over stdio until the client closes stdin (or a signal), with HTTP alongside.
async fn serve_stdio(
    listener: tokio::net::TcpListener,
    service: Service,
    tenant: Tenant,
) -> std::io::Result<()> {
    let tools = ElicitTools::new(service.clone(), Some(tenant));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(server::serve(listener, service, async move {
        tokio::select! {
            _ = stop_rx => {}
            _ = server::shutdown_signal() => {}
        }
    }));
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    tokio::select! {
        r = running.waiting() => {
            if let Err(e) = r {
                tracing::warn!(error = %e, "stdio session ended with an error");
            }
        }
        _ = server::shutdown_signal() => {}
    }
    let _ = stop_tx.send(());
    http.await.map_err(std::io::Error::other)?
}
