//! `phasecheck emit-cuda` and `phasecheck gpu run` (issue 4): thin glue over phasecheck-gpu.

use phasecheck_gpu::codegen::{generate, Backend};
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
}

#[derive(clap::Subcommand)]
pub enum GpuCommand {
    /// Run protocols on the GPU and compare every outcome with the model.
    Run(phasecheck_gpu::runner::RunArgs),
    /// (internal) Execute launch jobs in a child process; a sticky CUDA error ends only the child.
    #[command(hide = true)]
    Child { jobs: PathBuf },
}

pub fn emit(a: EmitArgs) -> ExitCode {
    let spec = match crate::load::load(&a.path, &a.params) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(2);
        }
    };
    match generate(&spec.proto, &spec.source, a.backend.backend(), 0) {
        Ok(k) => {
            print!("{}", k.source());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{}: backend {}: {e}", spec.display, a.backend.backend().name());
            ExitCode::from(1)
        }
    }
}

pub fn run(c: GpuCommand) -> ExitCode {
    match c {
        GpuCommand::Run(args) => ExitCode::from(phasecheck_gpu::runner::run(&args)),
        GpuCommand::Child { jobs } => ExitCode::from(phasecheck_gpu::runner::child_main(&jobs)),
    }
}
