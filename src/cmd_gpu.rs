//! `phasecheck emit-cuda` and `phasecheck gpu ...` (issues 4 and 11): the command-line arguments,
//! and thin glue over phasecheck-gpu (`runner::run`, `rejudge`, `report`).

use phasecheck_gpu::codegen::{generate, generate_plain, Backend};
use phasecheck_gpu::plan::{Budget, Settings};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum BackendArg {
    Libcu,
    Ptx,
}

impl BackendArg {
    fn backend(self) -> Backend {
        match self {
            BackendArg::Libcu => Backend::Libcu,
            BackendArg::Ptx => Backend::Ptx,
        }
    }
}

#[derive(clap::Args)]
pub struct EmitArgs {
    /// The `.phase` file.
    pub path: PathBuf,
    /// libcu: libcu++ `cuda::barrier`; ptx: inline PTX `mbarrier.*`.
    #[arg(long, value_enum, default_value_t = BackendArg::Libcu)]
    pub backend: BackendArg,
    /// Override a parameter: NAME=VALUE (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = crate::load::parse_override)]
    pub params: Vec<(String, i64)>,
    /// The barrier protocol alone, as a plain kernel (raw mbarrier PTX, one thread range per
    /// role, no conformance instrumentation): readable, and what `phasecheck import` reads back.
    #[arg(long, conflicts_with = "backend")]
    pub plain: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendSel {
    Libcu,
    Ptx,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeSel {
    Replay,
    Stress,
    Both,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// `.phase` files or folders.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = BackendSel::Both)]
    pub backend: BackendSel,
    #[arg(long, value_enum, default_value_t = ModeSel::Both)]
    pub mode: ModeSel,
    /// Stress: blocks (executions) per spec; replay: blocks per trace is min(N, 32).
    #[arg(long, default_value_t = 4096)]
    pub runs: u32,
    /// JSON report path (a `.md` table is written next to it). Default:
    /// phasecheck-gpu-<date>.json in the current folder (never the repository's committed
    /// results folder: a run is committed there only by naming it)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Bound of every wait in the kernels.
    #[arg(long, default_value_t = 20)]
    pub timeout_ms: u64,
    /// Budget of the model's outcome enumeration per spec: distinct states. A spec over it is
    /// reported `not run (budget: ...)`.
    #[arg(long, default_value_t = 200_000)]
    pub outcome_limit: usize,
    /// Budget of the model's outcome enumeration per spec: seconds.
    #[arg(long, default_value_t = 30.0)]
    pub outcome_seconds: f64,
    /// Budget of the trace search per spec: seconds (the traces found by then are replayed).
    #[arg(long, default_value_t = 10.0)]
    pub check_seconds: f64,
    /// Budget of the trace search per spec: states.
    #[arg(long)]
    pub check_states: Option<usize>,
    /// Budget of one spec's kernel jobs together (launches, child processes included): seconds.
    #[arg(long, default_value_t = 60.0)]
    pub kernel_seconds: f64,
    /// Folder of committed counterexample trace files: replay uses the file for a (spec, kind)
    /// when there is one, else the verifier's trace.
    #[arg(long, default_value = "counterexamples")]
    pub traces: PathBuf,
    /// Run only the model stages (enumeration, traces, code generation) and write the report:
    /// no NVRTC, no GPU.
    #[arg(long)]
    pub plan_only: bool,
    /// Plant a defect in the model (tests only: a failing model must not stop the suite).
    #[arg(long, hide = true, value_parser = crate::parse_mutant)]
    pub mutant: Option<phasecheck_model::rt::Mutant>,
    /// Override a parameter of every spec: NAME=VALUE (repeatable), as for `check`.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = crate::load::parse_override)]
    pub params: Vec<(String, i64)>,
    /// With --plan-only: stop (incomplete, exit 3) after this many seconds of the whole run. On
    /// the GPU, --kernel-seconds and the per-spec budgets bound the run instead (a bound that
    /// ended this process would leave its kernel children running).
    #[arg(long, value_name = "S", requires = "plan_only")]
    pub max_seconds: Option<f64>,
    /// With --plan-only: stop (incomplete, exit 3) when the process holds this many MiB
    /// (resident). Default: half of the memory available at start.
    #[arg(long, value_name = "MIB", requires = "plan_only")]
    pub max_memory: Option<usize>,
}

impl RunArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            paths: self.paths.clone(),
            backends: match self.backend {
                BackendSel::Libcu => vec![Backend::Libcu],
                BackendSel::Ptx => vec![Backend::Ptx],
                BackendSel::Both => vec![Backend::Ptx, Backend::Libcu],
            },
            replay: self.mode != ModeSel::Stress,
            stress: self.mode != ModeSel::Replay,
            runs: self.runs,
            out: Some(
                self.out
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(format!("phasecheck-gpu-{}.json", phasecheck_gpu::report::today()))),
            ),
            timeout_ms: self.timeout_ms,
            budget: Budget {
                outcome_states: self.outcome_limit,
                outcome_seconds: self.outcome_seconds,
                check_seconds: self.check_seconds,
                check_states: self.check_states,
                kernel_seconds: self.kernel_seconds,
            },
            traces: self.traces.is_dir().then(|| self.traces.clone()),
            plan_only: self.plan_only,
            mutant: self.mutant,
            params: self.params.clone(),
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct RejudgeArgs {
    /// A results file written by `gpu run`.
    pub report: PathBuf,
    /// Write the re-judged report here (JSON, and `.md` next to it); default: print the table.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Spec paths in the report are relative to this folder.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    #[arg(long, default_value = "counterexamples")]
    pub traces: PathBuf,
    /// Budget of the model's outcome enumeration per spec (and per replay prefix): seconds.
    #[arg(long, default_value_t = 120.0)]
    pub outcome_seconds: f64,
    #[command(flatten)]
    pub bounds: crate::limits::ProcessBounds,
}

#[derive(clap::Subcommand)]
pub enum GpuCommand {
    /// Run protocols on the GPU and judge every outcome against the model (within, unchecked,
    /// OUTSIDE).
    Run(RunArgs),
    /// Re-judge a results file's recorded observations under the current model (no GPU).
    Rejudge(RejudgeArgs),
    /// Print the docs/hardware-notes.md section of a results file: outcomes the model allows
    /// that no stress block showed.
    Notes {
        /// A results file written by `gpu run` or `gpu rejudge`.
        report: PathBuf,
    },
    /// (internal) Execute launch jobs in a child process; a sticky CUDA error ends only the child.
    #[command(hide = true)]
    Child { jobs: PathBuf },
}

pub fn emit(a: EmitArgs) -> ExitCode {
    let spec = match crate::load::load(&a.path, &a.params) {
        Ok(s) => s,
        Err(e) => {
            note!("{e}");
            return ExitCode::from(2);
        }
    };
    if a.plain {
        return match generate_plain(&spec.proto, &spec.source) {
            Ok(k) => {
                say!("{k}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                noteln!("{}: --plain: {e}", spec.display);
                ExitCode::from(1)
            }
        };
    }
    match generate(&spec.proto, &spec.source, a.backend.backend(), 0) {
        Ok(k) => {
            say!("{}", k.source());
            ExitCode::SUCCESS
        }
        Err(e) => {
            noteln!("{}: backend {}: {e}", spec.display, a.backend.backend().name());
            ExitCode::from(1)
        }
    }
}

pub fn run(c: GpuCommand) -> ExitCode {
    match c {
        GpuCommand::Run(args) => {
            if args.plan_only {
                let b = crate::limits::ProcessBounds {
                    max_seconds: args.max_seconds,
                    max_memory: args.max_memory,
                };
                crate::limits::start_unpolled(
                    &b,
                    false,
                    "gpu run --plan-only",
                    "while planning (outcome enumeration, traces, code generation)",
                );
            }
            ExitCode::from(phasecheck_gpu::runner::run(&args.settings()))
        }
        GpuCommand::Rejudge(a) => {
            crate::limits::start_unpolled(
                &a.bounds,
                false,
                &a.report.display().to_string(),
                "while re-judging (outcome enumerations and replays)",
            );
            let o = phasecheck_gpu::rejudge::Options {
                root: a.root,
                traces: a.traces.is_dir().then_some(a.traces),
                budget: Budget {
                    outcome_seconds: a.outcome_seconds,
                    outcome_states: 1_000_000,
                    ..Budget::default()
                },
            };
            match phasecheck_gpu::rejudge::rejudge_file(&a.report, &o) {
                Ok((_, report)) => {
                    if let Some(out) = &a.out {
                        if let Err(e) = report.write(out) {
                            noteln!("error: cannot write {}: {e}", out.display());
                            return ExitCode::from(2);
                        }
                    }
                    say!("{}", report.markdown());
                    let outside = report.count(phasecheck_gpu::compare::Verdict::Outside);
                    ExitCode::from(if outside > 0 { 1 } else { 0 })
                }
                Err(e) => {
                    noteln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        GpuCommand::Notes { report } => {
            let r: Result<phasecheck_gpu::report::Report, String> =
                phasecheck_model::io::read_text(&report, phasecheck_model::io::MAX_DATA_BYTES, &report.display().to_string())
                    .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()));
            match r {
                Ok(r) => {
                    say!("{}", r.hardware_notes_section());
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    noteln!("error: {}: {e}", report.display());
                    ExitCode::from(2)
                }
            }
        }
        GpuCommand::Child { jobs } => ExitCode::from(phasecheck_gpu::child::child_main(&jobs)),
    }
}
