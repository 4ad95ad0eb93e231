//! The `phasecheck` command line: a thin layer over the model, the verifier and the GPU crate.
//!
//! Exit codes: 0 every protocol holds (or matches its `expect`), 1 a violation (or a mismatch),
//! 2 bad input, 3 a bound was hit before the search finished.

#[macro_use]
mod out;
mod cmd_gpu;
mod cmd_import;
mod cmd_prove;
mod cmd_replay;
mod cmd_run;
mod cmd_test;
mod fuzz_commands;
mod limits;
mod load;
mod report;
mod shrink;

use clap::{Parser, Subcommand, ValueEnum};
use phasecheck_model::rt::Model;
use phasecheck_verifier::{bounds, check, CheckOptions, Progress, Verdict};
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
pub(crate) enum Format {
    Text,
    Json,
}

#[derive(clap::Args, Clone)]
pub(crate) struct SearchArgs {
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
    /// After every step, re-derive the model's invariants from scratch (slower; a broken one is
    /// an internal error, exit 5).
    #[arg(long)]
    self_check: bool,
    /// Explore executions past their first violation to the end, to list every kind reachable
    /// there too. This is the default of every command and of the library API; the flag stays
    /// for command lines that name it.
    #[arg(long, conflicts_with = "past_violation_factor")]
    all_kinds: bool,
    /// Explore states past a violation only up to about F x the states stored when the first
    /// violation was found (at least 2,000), then stop looking for more kinds: quicker on a
    /// buggy spec whose broken executions fan out. Executions without a violation are still
    /// explored in full (the verdict is the same); when states were set aside the search ends
    /// `violated, then incomplete` at this bound, and `test` says `incomplete`.
    #[arg(long, value_name = "F", value_parser = parse_factor)]
    past_violation_factor: Option<f64>,
    /// Store every ordering of interchangeable threads (turns the symmetry reduction off; the
    /// verdict is the same, the state count larger).
    #[arg(long)]
    no_symmetry: bool,
    /// Expand every enabled step of every state (turns the partial-order reduction off; the
    /// verdict and the kinds found are the same, the state count larger).
    #[arg(long)]
    no_por: bool,
    /// Threads that expand states (default: every core). The verdict and traces do not depend on it.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Plant a defect in the model (tests only: they show the guards catch it).
    #[arg(long, hide = true, value_parser = parse_mutant)]
    mutant: Option<phasecheck_model::rt::Mutant>,
}

fn parse_factor(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 1.0 => Ok(f),
        _ => Err(format!("`{s}` is not a number of at least 1")),
    }
}

pub(crate) fn parse_mutant(s: &str) -> Result<phasecheck_model::rt::Mutant, String> {
    phasecheck_model::rt::Mutant::ALL
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| format!("no mutant named `{s}`"))
}

pub(crate) fn model_for(proto: &phasecheck_model::program::ir::Protocol, a: &SearchArgs) -> Model {
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
        /// Instead of searching, replay every stored counterexample of each protocol found in
        /// TRACE_DIR (a folder of trace files, or one file) against the spec as it is now: the
        /// fix loop. Exit 0 when every violation is gone, 1 when one remains.
        #[arg(long, value_name = "TRACE_DIR", conflicts_with_all = ["trace_dir", "html", "swimlanes", "stop_at_first"])]
        against: Option<PathBuf>,
    },
    /// Check protocols and compare what is found with each file's `expect` line.
    Test(cmd_test::TestArgs),
    /// Print a protocol in canonical form, comments kept.
    Fmt {
        /// `.phase` files or folders (every `*.phase` below them).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print nothing; exit 1 (naming each file and its first differing line) when a file
        /// is not in canonical form. For CI.
        #[arg(long, conflicts_with = "write")]
        check: bool,
        /// Rewrite each file in place.
        #[arg(long)]
        write: bool,
    },
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
    /// Run a protocol on CPU threads (reference runtime) and compare with the model.
    Run(cmd_run::RunArgs),
    /// Recover a kernel's barrier protocol from its PTX (or CUDA source) as a `.phase` spec.
    Import(cmd_import::ImportArgs),
    /// (internal) The command-level fuzz campaign: mutated specs through every command, each in
    /// a forked process (docs/fuzzing.md).
    #[command(hide = true)]
    FuzzCommands(fuzz_commands::FuzzArgs),
}

fn progress(p: &Progress) {
    noteln!(
        "progress: {} states, {:.0} states/s, {} transitions, depth {}, queue {}, {} MiB held, {:.0} B/state stored",
        p.states,
        p.states as f64 / p.seconds.max(1e-9),
        p.transitions,
        p.depth,
        p.queue,
        p.memory_bytes >> 20,
        p.store_bytes as f64 / p.states.max(1) as f64
    );
}

pub(crate) fn options(a: &SearchArgs) -> CheckOptions {
    CheckOptions {
        max_states: a.max_states,
        max_seconds: a.max_seconds,
        max_memory_bytes: limits::memory(a).0,
        stop: Some(bounds::requested),
        stop_at_first: a.stop_at_first,
        // One exploration policy for `check`, `test`, the API and the GPU stage: every
        // execution to its end unless a bound is given.
        past_violation_factor: if a.all_kinds { None } else { a.past_violation_factor },
        progress: Some(progress),
        self_check: a.self_check,
        symmetry: !a.no_symmetry,
        por: !a.no_por,
        threads: a
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1),
    }
}

fn main() -> ExitCode {
    out::install_panic_backstop();
    let mut cli = Cli::parse();
    if let Command::FuzzCommands(a) = &cli.command {
        match fuzz_commands::drive(a) {
            // A forked child of the campaign: run one command as `main` would.
            fuzz_commands::Drive::Child(argv) => cli = Cli::parse_from(argv),
            fuzz_commands::Drive::Done(code) => return code,
        }
    }
    let code = match cli.command {
        Command::Check {
            paths,
            search,
            format: _,
            traces: _,
            against: Some(dir),
        } => match {
            limits::start(&search, false);
            load::load_all(&paths, &search.params)
        } {
            Ok(specs) => cmd_replay::check_against(&specs, &dir, &search),
            Err(e) => bad_input(&e),
        },
        Command::Check {
            paths,
            search,
            format,
            traces,
            against: None,
        } => cmd_check(&paths, &search, format, &traces),
        Command::Test(t) => cmd_test::run(&t),
        Command::Replay(a) => cmd_replay::run(a),
        Command::EmitCuda(a) => cmd_gpu::emit(a),
        Command::Gpu(c) => cmd_gpu::run(c),
        Command::Prove(a) => cmd_prove::prove(a),
        Command::Repair(a) => cmd_prove::repair(a),
        Command::Run(a) => cmd_run::run(a),
        Command::Import(a) => cmd_import::run(a),
        Command::Fmt { paths, check, write } => cmd_fmt(&paths, check, write),
        Command::FuzzCommands(_) => bad_input("error: the fuzz campaign cannot start itself\n"),
    };
    out::finish();
    code
}

/// `phasecheck fmt`: canonical form with every comment kept. The result is verified before it
/// is shown or written (it parses back to the same program and holds the same comments), so
/// `--write` cannot lose anything.
fn cmd_fmt(paths: &[PathBuf], check: bool, write: bool) -> ExitCode {
    use phasecheck_model::lang;
    let specs = match load::load_all(paths, &[]) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let mut unformatted = 0;
    for spec in &specs {
        let text = lang::pretty_with_comments(&spec.ast, &spec.source);
        let texts = |s: &str| -> Vec<String> { lang::comments::comments(s).into_iter().map(|c| c.text).collect() };
        let same = lang::parse(&text).is_ok_and(|back| lang::same_program(&back, &spec.ast));
        if !same || texts(&text) != texts(&spec.source) {
            noteln!(
                "error: {}: formatting would change the program or its comments; the file is left as it is (please report this)",
                spec.display
            );
            return ExitCode::from(2);
        }
        if check {
            if text != spec.source {
                unformatted += 1;
                let n = text.lines().zip(spec.source.lines()).take_while(|(a, b)| a == b).count();
                sayln!(
                    "{}:{}: not in canonical form\n  - {}\n  + {}",
                    spec.display,
                    n + 1,
                    spec.source.lines().nth(n).unwrap_or("(end of file)"),
                    text.lines().nth(n).unwrap_or("(end of file)")
                );
            }
        } else if write {
            if text != spec.source {
                // A canonical form past the size every command reads would leave a file no
                // command accepts: refuse, and keep the original.
                if text.len() > phasecheck_model::spec::MAX_SPEC_BYTES {
                    noteln!(
                        "error: {}: its canonical form is {} bytes, over the {} MiB a spec may have; the file is left as it was",
                        spec.display,
                        text.len(),
                        phasecheck_model::spec::MAX_SPEC_BYTES >> 20
                    );
                    return ExitCode::from(2);
                }
                // Through a temporary file and a rename: a full disk leaves the original whole.
                if let Err(e) = phasecheck_model::io::write_atomic(&spec.path, text.as_bytes()) {
                    noteln!("error: cannot write {} (the file is left as it was): {e}", spec.display);
                    return ExitCode::from(2);
                }
                noteln!("formatted {}", spec.display);
            }
        } else {
            say!("{text}");
        }
    }
    if check && unformatted > 0 {
        sayln!(
            "{unformatted} of {} file(s) not in canonical form (`phasecheck fmt --write` fixes them)",
            specs.len()
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Bad input: the diagnostics, and exit status 2 with nothing checked.
pub(crate) fn bad_input(diagnostics: &str) -> ExitCode {
    note!("{diagnostics}");
    ExitCode::from(2)
}

fn cmd_check(paths: &[PathBuf], a: &SearchArgs, format: Format, traces: &cmd_replay::TraceOutputs) -> ExitCode {
    limits::start(a, format == Format::Json);
    let specs = match load::load_all(paths, &a.params) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    let opts = options(a);
    let (mut violated, mut incomplete, mut internal) = (false, false, false);
    let mut collected = cmd_replay::Collected::default();
    for spec in specs {
        let model = model_for(&spec.proto, a);
        let r = limits::search(a, &spec.display, || check(&model, &opts));
        violated |= r.verdict == Verdict::Violated;
        incomplete |= r.verdict == Verdict::Incomplete;
        if let Some(i) = &r.internal {
            internal = true;
            noteln!("{}: {}", spec.display, i.describe());
        }
        // A search cut short says what to shrink (a few small trial searches).
        // They share what is left of the search's time bound, so the bound covers them too.
        let hint = (r.verdict == Verdict::Incomplete).then(|| {
            let budget = (r.stats.states / 4).clamp(1_000, 200_000);
            let left = a.max_seconds.map(|m| m - r.stats.seconds);
            shrink::suggest(&spec, &a.params, budget, left, limits::memory(a).0)
        });
        match format {
            Format::Text => {
                say!("{}", report::render_text(&spec, &model, &r));
                if r.verdict == Verdict::Incomplete {
                    sayln!("limits:  {}", limits::describe(a));
                }
                if let Some((h, skipped)) = &hint {
                    sayln!(
                        "{}",
                        shrink::describe(h, skipped, r.bound == Some(phasecheck_verifier::Bound::StepBudget))
                    );
                }
                sayln!();
            }
            Format::Json => {
                let mut v = report::render_json(&spec, &model, &r);
                v["limits"] = limits::json(a);
                if let Some((h, _)) = &hint {
                    v["shrink"] = serde_json::json!(h
                        .iter()
                        .map(|c| serde_json::json!({"what": c.what, "from": c.from, "to": c.to, "finished_in": c.finished_in, "depth": c.depth}))
                        .collect::<Vec<_>>());
                }
                out::stdout_raw(&format!("{v}\n"));
            }
        }
        if let Err(e) = cmd_replay::after_check(&spec, &model, &r, traces, &mut collected) {
            noteln!("{e}");
            return ExitCode::from(2);
        }
    }
    if let Err(e) = cmd_replay::finish_check(traces, collected) {
        noteln!("{e}");
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
