//! The `elicitd` binary: parse config, init logging, serve.

use clap::Parser;
use elicitd::{
    config::{Cli, Config},
    server, telemetry,
};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = match Config::from_cli(Cli::parse()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("elicitd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    telemetry::init_logging(config.log_format);
    if let Some(key) = &config.generated_key {
        // Printed once, to the terminal, never through the logger.
        println!(
            "elicitd: no ELICITD_API_KEYS set; generated API key for tenant \"default\": {key}"
        );
    }
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
            return std::process::ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("elicitd: cannot bind {listen}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    tracing::info!(%addr, store = store_kind, "elicitd listening");
    if let Some(addr) = metrics_listen {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => {
                tracing::info!(%addr, "metrics listening");
                tokio::spawn(async move { axum::serve(l, server::metrics_router()).await });
            }
            Err(e) => {
                eprintln!("elicitd: cannot bind metrics listener {addr}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    match server::serve(listener, service, server::shutdown_signal()).await {
        Ok(()) => {
            tracing::info!("elicitd stopped");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("elicitd: server error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
