//! `phasecheck run FILE --cpu [--runs N]`: run a protocol on OS threads over the
//! reference barrier runtime (phasecheck-runtime) and compare the outcome histogram with the set
//! the model allows, in the GPU report's outcome format.
//!
//! Exit status: 0 every outcome is allowed, 1 some outcome is outside the model (a disagreement
//! between runtime and model) or a barrier law was broken, 2 bad input, 3 the comparison is
//! partial (the model's enumeration or the runs stopped at `--max-seconds`, or `--max-memory`
//! ended the process) with some outcome not in the part of the model enumerated.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The `.phase` file.
    pub path: PathBuf,
    /// Run on CPU threads with the reference runtime (the only target today; the GPU has
    /// `phasecheck gpu run`).
    #[arg(long, required = true)]
    pub cpu: bool,
    /// How many runs.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// Seed of the first run's random pauses (run i uses seed + i).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this many seconds: four fifths for the model's enumeration (past it the
    /// comparison is partial), the rest for the runs.
    #[arg(long, value_name = "S")]
    pub max_seconds: Option<f64>,
    /// End the process (verdict incomplete, exit 3) when it holds this many MiB. Default: half of
    /// the memory available at start.
    #[arg(long, value_name = "MIB")]
    pub max_memory: Option<usize>,
    /// Override a parameter: NAME=VALUE (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = crate::load::parse_override)]
    pub params: Vec<(String, i64)>,
}

pub fn run(a: RunArgs) -> ExitCode {
    // The runtime stops itself at --max-seconds; the watchdog holds the memory bound and ends
    // the process shortly after the time bound should a run not return.
    crate::limits::start_backstop(
        a.max_seconds,
        a.max_memory,
        &a.path.display().to_string(),
        "while running the protocol on CPU threads",
    );
    let spec = match crate::load::load_all(std::slice::from_ref(&a.path), &a.params) {
        Ok(mut s) if s.len() == 1 => s.remove(0),
        Ok(_) => {
            noteln!("error: `run` takes one .phase file");
            return ExitCode::from(2);
        }
        Err(e) => {
            note!("{e}");
            return ExitCode::from(2);
        }
    };
    let params: Vec<String> = spec.proto.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    sayln!("== {} ({})", spec.proto.name, spec.display);
    if !params.is_empty() {
        sayln!("params:  {}", params.join(" "));
    }
    match phasecheck_runtime::cpu::run_cpu_within(&spec.proto, a.runs, a.seed, a.max_seconds) {
        Ok(rep) => {
            say!("{}", rep.render(&spec.proto));
            let bad = !rep.outside().is_empty() || !rep.histogram.broken.is_empty();
            let partial = rep.partial() && !rep.unmatched().is_empty();
            ExitCode::from(if bad {
                1
            } else if partial {
                3
            } else {
                0
            })
        }
        Err(e) => {
            noteln!("error: {}: the reference runtime cannot run this protocol: {e}", spec.display);
            ExitCode::from(2)
        }
    }
}
