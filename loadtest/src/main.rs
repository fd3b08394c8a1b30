//! `elicitd-loadtest` command line: one subcommand per scenario, common flags on each.
//! Exit codes: 0 clean run, 1 the run had errors (unless `--allow-errors`), 2 it could not run.

use std::{process::ExitCode, time::Duration};

use clap::{Args, Parser, Subcommand};
use elicitd_loadtest::{parse_duration, run, ClientKind, Options, Scenario};

/// mimalloc, as the replica uses: the generator's own CPU per request is part of what the
/// machine spends, and glibc's malloc (with its chunk consolidation) was a few per cent of it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "elicitd-loadtest",
    version,
    about = "Load generator for elicitd (status, create, await wake-up, mixed, webhooks)"
)]
struct Cli {
    #[command(subcommand)]
    scenario: Command,
}

#[derive(Args, Clone)]
struct Common {
    /// Base URL of the replica under test.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// API key (`Authorization: Bearer <key>`), one of the server's ELICITD_API_KEYS.
    #[arg(long)]
    api_key: String,
    /// Workers: connections and requests in flight.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Length of the measured phase, e.g. 500ms, 5s, 2m.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Print one JSON object instead of the readable summary.
    #[arg(long)]
    json: bool,
    /// Exit 0 even when some requests failed.
    #[arg(long)]
    allow_errors: bool,
    /// HTTP client library.
    #[arg(long, value_enum, default_value = "hyper")]
    client: ClientKind,
    /// Per-request timeout (long-polls get their window on top).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
    /// No progress line on stderr.
    #[arg(long)]
    quiet: bool,
    /// Generator threads. One (like `wrk -t1`) keeps the generator's own CPU per request low
    /// and steady: it shares the machine with what it measures, and a multi-threaded runtime
    /// pays a cross-thread wake-up between each request and its connection task.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Also report the CPU time this process spends per request, as `label=pid` (e.g.
    /// `--cpu replica=1234 --cpu redis=5678`; Linux, same machine). The generator's own is
    /// always reported.
    #[arg(long = "cpu", value_parser = elicitd_loadtest::cpu::parse_pid)]
    cpu: Vec<(String, u32)>,
}

#[derive(Subcommand)]
enum Command {
    /// GET /healthz in a loop: the replica's HTTP ceiling with the same client settings.
    Healthz(Common),
    /// Seed approvals, then GET /v1/elicitations/{id} in a loop (keep-alive connections).
    Status {
        #[command(flatten)]
        common: Common,
        /// Elicitations to create first and poll round-robin.
        #[arg(long, default_value_t = 1000)]
        seed: usize,
    },
    /// POST /v1/approvals in a loop.
    Create(Common),
    /// Park --waiters awaits on --url, hold them, decide all via --decide-url; wake latency.
    Await {
        #[command(flatten)]
        common: Common,
        /// Awaits to park (one connection each: raise `ulimit -n` for thousands).
        #[arg(long, default_value_t = 1000)]
        waiters: usize,
        /// How long to keep them parked before deciding (≤ 30s).
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        hold: Duration,
        /// Replica that receives the decisions (another one than --url).
        #[arg(long)]
        decide_url: String,
        /// Decisions per second, all deciders together (0: as fast as --concurrency deciders
        /// go). A pace below the machine's capacity measures the wake-up path rather than the
        /// queue of decisions.
        #[arg(long, default_value_t = 0)]
        decide_rate: u32,
    },
    /// Agents creating, polling, awaiting, reading results; reviewers decide via --decide-url.
    Mixed {
        #[command(flatten)]
        common: Common,
        /// Replica that receives the decisions (default: --url).
        #[arg(long)]
        decide_url: Option<String>,
    },
    /// Create --count approvals with a webhookUrl on an in-process receiver, decide them via
    /// --decide-url, measure webhook delivery latency (arrived − decision sent).
    Webhooks {
        #[command(flatten)]
        common: Common,
        /// Approvals to create and decide.
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Replica that receives the decisions (default: --url).
        #[arg(long)]
        decide_url: Option<String>,
        /// Address the receiver listens on; the server must be allowed to reach it
        /// (ELICITD_WEBHOOKS_ALLOW_PRIVATE=true for loopback).
        #[arg(long, default_value = "127.0.0.1:0")]
        receiver: std::net::SocketAddr,
        /// Create without webhookUrl: the same run without webhooks, for comparison.
        #[arg(long)]
        no_webhook: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (common, scenario) = match cli.scenario {
        Command::Healthz(c) => (c, Scenario::Healthz),
        Command::Status { common, seed } => (common, Scenario::Status { seed }),
        Command::Create(c) => (c, Scenario::Create),
        Command::Await {
            common,
            waiters,
            hold,
            decide_url,
            decide_rate,
        } => (
            common,
            Scenario::Await {
                waiters,
                hold,
                decide_url,
                decide_rate,
            },
        ),
        Command::Mixed { common, decide_url } => {
            let decide_url = decide_url.unwrap_or_else(|| common.url.clone());
            (common, Scenario::Mixed { decide_url })
        }
        Command::Webhooks {
            common,
            count,
            decide_url,
            receiver,
            no_webhook,
        } => {
            let decide_url = decide_url.unwrap_or_else(|| common.url.clone());
            let receiver = (!no_webhook).then_some(receiver);
            (
                common,
                Scenario::Webhooks {
                    count,
                    decide_url,
                    receiver,
                },
            )
        }
    };
    let opts = Options {
        url: common.url.clone(),
        api_key: common.api_key.clone(),
        concurrency: common.concurrency,
        duration: common.duration,
        client: common.client,
        progress: !common.quiet,
        timeout: common.timeout,
        cpu: elicitd_loadtest::cpu::CpuProbe::new(common.cpu.clone()),
    };
    let built = if common.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(common.threads)
            .enable_all()
            .build()
    };
    let runtime = match built {
        Ok(r) => r,
        Err(e) => {
            eprintln!("elicitd-loadtest: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(run(&opts, &scenario)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("elicitd-loadtest: {e}");
            return ExitCode::from(2);
        }
    };
    if common.json {
        match serde_json::to_string(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("elicitd-loadtest: cannot print the report: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{}", report.summary());
    }
    if report.errors > 0 && !common.allow_errors {
        eprintln!(
            "elicitd-loadtest: {} of {} requests failed (--allow-errors to exit 0 anyway)",
            report.errors, report.requests
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
