//! `phasecheck emit-cuda` and `phasecheck gpu run` (issue 4 fills this in).

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct EmitArgs {
    pub path: PathBuf,
}

#[derive(clap::Subcommand)]
pub enum GpuCommand {
    /// Run protocols on the GPU.
    Run { paths: Vec<PathBuf> },
}

pub fn emit(a: EmitArgs) -> ExitCode {
    eprintln!("error: emit-cuda for {} is not available in this build", a.path.display());
    ExitCode::from(2)
}

pub fn run(c: GpuCommand) -> ExitCode {
    let GpuCommand::Run { paths } = c;
    eprintln!("error: gpu run of {} path(s) is not available in this build", paths.len());
    ExitCode::from(2)
}
