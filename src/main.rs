//! The `phasecheck` command line: a thin layer over the model, the verifier and the GPU crate.
//!
//! Exit codes: 0 every protocol holds (or matches its `expect`), 1 a violation (or a mismatch),
//! 2 bad input, 3 a bound was hit before the search finished.

mod cmd_gpu;
mod cmd_prove;
mod cmd_replay;
mod load;
mod report;

use clap::{Parser, Subcommand, ValueEnum};
use phasecheck_model::step::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Progress, Verdict};
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
    /// Stop (verdict incomplete) when stored states are estimated to need this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 8192)]
    max_memory: usize,
    /// After every step, re-derive the model's invariants from scratch (slower; a broken one is
    /// an internal error, exit 5).
    #[arg(long)]
    self_check: bool,
    /// Plant a defect in the model (tests only: they show the guards catch it).
    #[arg(long, hide = true, value_parser = parse_mutant)]
    mutant: Option<phasecheck_model::step::Mutant>,
}

fn parse_mutant(s: &str) -> Result<phasecheck_model::step::Mutant, String> {
    phasecheck_model::step::Mutant::ALL
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| format!("no mutant named `{s}`"))
}

fn model_for(proto: &phasecheck_model::ir::Protocol, a: &SearchArgs) -> Model {
    let mut m = Model::new(proto.clone());
    m.mutant = a.mutant;
    m
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
        /// Pass a file when the kinds found are a non-empty subset of its `expect` line (the
        /// default asks for exactly the listed kinds).
        #[arg(long)]
        subset: bool,
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
    /// Prove the counting laws with Z3 for every value in ranges (exit 0 proved, 1 refuted, 3 unknown).
    Prove(cmd_prove::ProveArgs),
    /// Propose the smallest one-constant change that makes the counting laws hold, as a diff.
    Repair(cmd_prove::RepairArgs),
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
        max_memory_bytes: a.max_memory.saturating_mul(1 << 20),
        stop_at_first: a.stop_at_first,
        progress: Some(progress),
        self_check: a.self_check,
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
        Command::Test { paths, search, subset } => cmd_test(&paths, &search, subset),
        Command::Replay(a) => cmd_replay::run(a),
        Command::EmitCuda(a) => cmd_gpu::emit(a),
        Command::Gpu(c) => cmd_gpu::run(c),
        Command::Prove(a) => cmd_prove::prove(a),
        Command::Repair(a) => cmd_prove::repair(a),
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
    let specs = match load::load_all(paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let opts = options(a);
    let (mut violated, mut incomplete, mut internal) = (false, false, false);
    let mut collected = cmd_replay::Collected::default();
    for spec in specs {
        let model = model_for(&spec.proto, a);
        let r = check(&model, &opts);
        violated |= r.verdict == Verdict::Violated;
        incomplete |= r.verdict == Verdict::Incomplete;
        if let Some(i) = &r.internal {
            internal = true;
            eprintln!("{}: {}", spec.display, i.describe());
        }
        match format {
            Format::Text => println!("{}", report::render_text(&spec, &model, &r)),
            Format::Json => println!("{}", report::render_json(&spec, &model, &r)),
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
    ExitCode::from(if internal {
        5
    } else if violated {
        1
    } else if incomplete {
        3
    } else {
        0
    })
}

fn cmd_test(paths: &[PathBuf], a: &SearchArgs, subset: bool) -> ExitCode {
    let specs = match load::load_all(paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let opts = options(a);
    let mut rows = Vec::new();
    let mut failures = 0;
    let mut internal = 0;
    for spec in &specs {
        let model = model_for(&spec.proto, a);
        let r = check(&model, &opts);
        let found: BTreeSet<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
        let (expected, ok) = match &spec.proto.expect {
            None if !spec.proto.expect_given => ("(none)".to_string(), r.verdict == Verdict::Holds),
            None => ("holds".to_string(), r.verdict == Verdict::Holds),
            Some(ks) => {
                let allowed: BTreeSet<ViolationKind> = ks.iter().copied().collect();
                // Exactly the listed kinds, from a search that finished; `--subset` (and
                // `--stop-at-first`, which finds one kind) accept any non-empty subset.
                let ok = if subset || opts.stop_at_first {
                    !found.is_empty() && found.is_subset(&allowed) && (r.bound.is_none() || opts.stop_at_first)
                } else {
                    found == allowed && r.bound.is_none()
                };
                (ks.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "), ok)
            }
        };
        let got = match r.verdict {
            Verdict::Holds => "holds".to_string(),
            Verdict::Incomplete => format!("incomplete ({})", r.bound.map(|b| b.describe()).unwrap_or("?")),
            Verdict::Violated => found.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
            Verdict::InternalError => {
                internal += 1;
                let i = r.internal.as_ref();
                eprintln!("{}: {}", spec.display, i.map(|i| i.describe()).unwrap_or_default());
                format!("INTERNAL ERROR [{}]", i.map(|i| i.rule.as_str()).unwrap_or("?"))
            }
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
    ExitCode::from(if internal > 0 {
        5
    } else if failures == 0 {
        0
    } else {
        1
    })
}
