//! `phasecheck replay TRACE.json` (issue 3 fills this in).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// A trace file written by `phasecheck check --trace-dir`.
    pub trace: PathBuf,
}

pub fn run(a: ReplayArgs) -> ExitCode {
    eprintln!("error: replay of {} is not available in this build", a.trace.display());
    ExitCode::from(2)
}
