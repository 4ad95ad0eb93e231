//! The `phasecheck` command line: a thin layer over the model, the verifier and the GPU crate.
//!
//! Exit codes: 0 every protocol holds (or matches its `expect`), 1 a violation (or a mismatch),
//! 2 bad input, 3 a bound was hit before the search finished.

mod cmd_gpu;
mod cmd_replay;
mod limits;
mod load;
mod report;

use clap::{Parser, Subcommand, ValueEnum};
use phasecheck_model::step::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{bounds, check, CheckOptions, Progress, Verdict};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// The search allocates and frees a state per transition; mimalloc halves the time glibc's
/// allocator takes for that (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "phasecheck",
    version,
    about = "Proves or refutes CUDA asynchronous-barrier (mbarrier) protocols"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(clap::Args, Clone)]
struct SearchArgs {
    /// Override a parameter: NAME=VALUE (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = load::parse_override)]
    params: Vec<(String, i64)>,
    /// Stop after the first violation found.
    #[arg(long)]
    stop_at_first: bool,
    /// Stop (verdict incomplete) after storing this many states.
    #[arg(long, value_name = "N")]
    max_states: Option<usize>,
    /// Stop (verdict incomplete) after this many seconds.
    #[arg(long, value_name = "S")]
    max_seconds: Option<f64>,
    /// Stop (verdict incomplete) when the process holds this many MiB (resident, as the OS
    /// counts it). Default: half of the memory available at start.
    #[arg(long, value_name = "MIB")]
    max_memory: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Check protocols: every reachable violation kind, each with a shortest trace.
    Check {
        /// `.phase` files or folders (every `*.phase` below them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        search: SearchArgs,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[command(flatten)]
        traces: cmd_replay::TraceOutputs,
    },
    /// Check protocols and compare what is found with each file's `expect` line.
    Test {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        #[command(flatten)]
        search: SearchArgs,
    },
    /// Print a protocol in canonical form.
    Fmt { path: PathBuf },
    /// Re-execute a recorded trace in the model, checking every observation.
    Replay(cmd_replay::ReplayArgs),
    /// Generate the CUDA kernel of a protocol.
    EmitCuda(cmd_gpu::EmitArgs),
    /// Run protocols on the GPU and compare with the model.
    #[command(subcommand)]
    Gpu(cmd_gpu::GpuCommand),
}

fn progress(p: &Progress) {
    eprintln!(
        "progress: {} states, {:.0} states/s, {} transitions, depth {}, ~{} MiB",
        p.states,
        p.states as f64 / p.seconds.max(1e-9),
        p.transitions,
        p.depth,
        p.memory_bytes >> 20
    );
}

fn options(a: &SearchArgs) -> CheckOptions {
    CheckOptions {
        max_states: a.max_states,
        max_seconds: a.max_seconds,
        max_memory_bytes: limits::memory(a).0,
        stop: Some(bounds::requested),
        stop_at_first: a.stop_at_first,
        progress: Some(progress),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check {
            paths,
            search,
            format,
            traces,
        } => cmd_check(&paths, &search, format, &traces),
        Command::Test { paths, search } => cmd_test(&paths, &search),
        Command::Replay(a) => cmd_replay::run(a),
        Command::EmitCuda(a) => cmd_gpu::emit(a),
        Command::Gpu(c) => cmd_gpu::run(c),
        Command::Fmt { path } => match load::load(&path, &[]) {
            Ok(spec) => {
                print!("{}", phasecheck_model::lang::pretty(&spec.ast));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprint!("{e}");
                ExitCode::from(2)
            }
        },
    }
}

/// Bad input: the diagnostics, and exit status 2 with nothing checked.
fn bad_input(diagnostics: &str) -> ExitCode {
    eprint!("{diagnostics}");
    ExitCode::from(2)
}

fn cmd_check(paths: &[PathBuf], a: &SearchArgs, format: Format, traces: &cmd_replay::TraceOutputs) -> ExitCode {
    limits::start(a, format == Format::Json);
    let specs = match load::load_all(paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let opts = options(a);
    let (mut violated, mut incomplete) = (false, false);
    let mut collected = cmd_replay::Collected::default();
    for spec in specs {
        let model = Model::new(spec.proto.clone());
        let r = limits::search(a, &spec.display, || check(&model, &opts));
        violated |= r.verdict == Verdict::Violated;
        incomplete |= r.verdict == Verdict::Incomplete;
        match format {
            Format::Text => {
                print!("{}", report::render_text(&spec, &model, &r));
                if r.verdict == Verdict::Incomplete {
                    println!("limits:  {}", limits::describe(a));
                }
                println!();
            }
            Format::Json => {
                let mut v = report::render_json(&spec, &model, &r);
                v["limits"] = limits::json(a);
                println!("{v}");
            }
        }
        if let Err(e) = cmd_replay::after_check(&spec, &model, &r, traces, &mut collected) {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    }
    if let Err(e) = cmd_replay::finish_check(traces, collected) {
        eprintln!("{e}");
        return ExitCode::from(2);
    }
    ExitCode::from(if violated {
        1
    } else if incomplete {
        3
    } else {
        0
    })
}

fn cmd_test(paths: &[PathBuf], a: &SearchArgs) -> ExitCode {
    limits::start(a, false);
    let specs = match load::load_all(paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let opts = options(a);
    let mut rows = Vec::new();
    let mut failures = 0;
    for spec in &specs {
        let model = Model::new(spec.proto.clone());
        let r = limits::search(a, &spec.display, || check(&model, &opts));
        let found: BTreeSet<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
        let (expected, ok) = match &spec.proto.expect {
            None if !spec.proto.expect_given => ("(none)".to_string(), r.verdict == Verdict::Holds),
            None => ("holds".to_string(), r.verdict == Verdict::Holds),
            Some(ks) => {
                let allowed: BTreeSet<ViolationKind> = ks.iter().copied().collect();
                (
                    ks.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                    !found.is_empty() && found.is_subset(&allowed) && r.bound.is_none()
                        || (!found.is_empty() && found.is_subset(&allowed) && opts.stop_at_first),
                )
            }
        };
        let got = match r.verdict {
            Verdict::Holds => "holds".to_string(),
            Verdict::Incomplete => format!("incomplete ({})", r.bound.map(|b| b.describe()).unwrap_or("?")),
            Verdict::Violated => found.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
        };
        if !ok {
            failures += 1;
        }
        rows.push((spec.display.clone(), expected, got, ok, r.stats.states, r.stats.seconds));
    }
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(4).max(4);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(6).max(6);
    let w2 = rows.iter().map(|r| r.2.len()).max().unwrap_or(5).max(5);
    println!("{:<w0$}  {:<w1$}  {:<w2$}  {:>9}  result", "spec", "expect", "found", "states");
    for (f, e, g, ok, states, _) in &rows {
        println!("{f:<w0$}  {e:<w1$}  {g:<w2$}  {states:>9}  {}", if *ok { "ok" } else { "MISMATCH" });
    }
    let total: f64 = rows.iter().map(|r| r.5).sum();
    println!(
        "{} passed, {} failed ({} specs, {:.1} s of search)",
        rows.len() - failures,
        failures,
        rows.len(),
        total
    );
    ExitCode::from(if failures == 0 { 0 } else { 1 })
}
