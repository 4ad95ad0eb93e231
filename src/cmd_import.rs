//! `phasecheck import`: PTX (or CUDA, compiled in-process with NVRTC) -> a `.phase` spec,
//! with every recovered fact listed on stderr. Exit 0 when everything was recovered (exactly or
//! under a stated assumption), 3 when something is unresolved, 2 for bad input.

use phasecheck_import::facts::Status;
use phasecheck_import::{import, Options};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    /// The kernel: a `.ptx` file, or a `.cu` file compiled with NVRTC (sm_90a unless the
    /// flags after `--` name another architecture).
    kernel: PathBuf,
    /// The entry to import (default: the only `.entry`).
    #[arg(long)]
    entry: Option<String>,
    /// Threads per block, X[,Y,Z] (default: the entry's .reqntid or .maxntid).
    #[arg(long, value_name = "X[,Y,Z]", value_parser = parse_block)]
    block: Option<[u32; 3]>,
    /// A kernel param's value: NAME=V, by its PTX name (`kernel_param_2`) or index (`2=V`); a
    /// field of a struct param by its byte offset: NAME+OFF=V (`0+1152=128`).
    #[arg(long = "param", value_name = "NAME[+OFF]=V", value_parser = parse_kv)]
    params: Vec<(String, i64)>,
    /// Bytes a tensor copy delivers, by its tensor-map param or destination buffer: NAME=B.
    #[arg(long = "tma-bytes", value_name = "NAME=B", value_parser = parse_kv)]
    tma_bytes: Vec<(String, i64)>,
    /// Write the spec here instead of standard output.
    #[arg(short = 'o', value_name = "OUT.phase")]
    out: Option<PathBuf>,
    /// NVRTC flags for a `.cu` input (after `--`): `-DSTAGES=4`, `-arch=sm_90a`, `-I dir`.
    #[arg(last = true)]
    nvrtc_flags: Vec<String>,
}

fn parse_block(s: &str) -> Result<[u32; 3], String> {
    let v: Result<Vec<u32>, _> = s.split(',').map(|x| x.trim().parse::<u32>()).collect();
    match v.map_err(|e| e.to_string())?.as_slice() {
        [x] => Ok([*x, 1, 1]),
        [x, y] => Ok([*x, *y, 1]),
        [x, y, z] => Ok([*x, *y, *z]),
        _ => Err("give one to three sizes: X[,Y,Z]".into()),
    }
}

fn parse_kv(s: &str) -> Result<(String, i64), String> {
    let (k, v) = s.split_once('=').ok_or("expected NAME=VALUE")?;
    let v = v.trim();
    let n = if let Some(h) = v.strip_prefix("0x") {
        i64::from_str_radix(h, 16)
    } else {
        v.parse::<i64>()
    };
    Ok((k.trim().to_string(), n.map_err(|e| format!("`{v}` is not an integer: {e}"))?))
}

/// Compile a `.cu` file to PTX with NVRTC: line info on, the file's folder on the include
/// path, sm_90a unless the flags say otherwise.
fn compile(path: &std::path::Path, src: &str, flags: &[String]) -> Result<String, String> {
    if !phasecheck_gpu::nvrtc::available() {
        return Err("NVRTC is not available (run `source gpu-conformance/ci/setup-nvrtc.sh`, or set PHASECHECK_NVRTC_LIB), so a .cu file cannot be compiled; import its .ptx instead".into());
    }
    let mut arch = "sm_90a".to_string();
    let mut opts = Vec::new();
    let mut k = 0;
    while k < flags.len() {
        let f = &flags[k];
        if let Some(a) = f.strip_prefix("-arch=").or_else(|| f.strip_prefix("--gpu-architecture=")) {
            arch = a.to_string();
        } else if f == "-arch" || f == "--gpu-architecture" {
            k += 1;
            arch = flags.get(k).cloned().unwrap_or(arch);
        } else {
            opts.push(f.clone());
        }
        k += 1;
    }
    if !opts.iter().any(|o| o.starts_with("--std") || o.starts_with("-std")) {
        opts.push("--std=c++17".into());
    }
    opts.push("-lineinfo".into());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut includes = vec![dir.display().to_string()];
    includes.extend(phasecheck_gpu::nvrtc::include_paths());
    let arch: &'static str = Box::leak(arch.into_boxed_str());
    phasecheck_gpu::sys::compile_ptx(src, &path.display().to_string(), arch, &includes, &opts)
}

/// NVRTC's first error as `FILE:LINE:COL: error: ...` (its log says `FILE(LINE): error: ...`,
/// then the source line and a caret, both indented by two columns); anything else as it came.
fn nvrtc_error(display: &str, e: &str) -> String {
    let log = match e.find("log: \"") {
        Some(k) => e[k + 6..]
            .trim_end_matches(" }")
            .trim_end_matches('"')
            .replace("\\n", "\n")
            .replace("\\\"", "\""),
        None => e.to_string(),
    };
    let lines: Vec<&str> = log.lines().collect();
    for (k, l) in lines.iter().enumerate() {
        if let Some((head, msg)) = l.split_once("): error: ") {
            if let Some((file, line)) = head.rsplit_once('(') {
                let col = lines.get(k + 2).and_then(|c| c.find('^')).map_or(1, |c| c.saturating_sub(2) + 1);
                return format!("{file}:{line}:{col}: error: {msg} (NVRTC)");
            }
        }
    }
    format!("{display}: error: {}", log.trim_end())
}

pub(crate) fn run(a: ImportArgs) -> ExitCode {
    let display = a.kernel.display().to_string();
    let text = match std::fs::read_to_string(&a.kernel) {
        Ok(t) => t,
        Err(e) => {
            noteln!("{display}: error: cannot read it: {e}");
            return ExitCode::from(2);
        }
    };
    let is_cu = a.kernel.extension().is_some_and(|e| e == "cu" || e == "cuh");
    let ptx = if is_cu {
        match compile(&a.kernel, &text, &a.nvrtc_flags) {
            Ok(p) => p,
            Err(e) => {
                noteln!("{}", nvrtc_error(&display, &e));
                return ExitCode::from(2);
            }
        }
    } else {
        if !a.nvrtc_flags.is_empty() {
            noteln!("{display}: error: NVRTC flags after `--` apply to a .cu input only; this is PTX");
            return ExitCode::from(2);
        }
        text
    };
    let name = a.kernel.file_name().map_or(display.clone(), |n| n.to_string_lossy().into_owned());
    let opts = Options {
        entry: a.entry.clone(),
        block: a.block,
        params: a.params.iter().cloned().collect::<HashMap<_, _>>(),
        tma_bytes: a.tma_bytes.iter().cloned().collect::<HashMap<_, _>>(),
        ptx_name: name,
    };
    let imported = match import(&ptx, &opts) {
        Ok(i) => i,
        Err(e) => {
            noteln!(
                "{}",
                e.render(&if is_cu { format!("{display} (its PTX)") } else { display.clone() })
            );
            return ExitCode::from(2);
        }
    };
    let b = imported.block;
    noteln!(
        "import: {display}, entry {}, block {}x{}x{}: {} role(s), {} barrier declaration(s)",
        imported.entry,
        b[0],
        b[1],
        b[2],
        imported.roles.len(),
        imported.barriers.len()
    );
    for r in &imported.roles {
        noteln!(
            "  role {:<10} threads {}..{}{}, {} statement(s)",
            r.name,
            r.first,
            r.first + r.threads - 1,
            if r.uniform { " (warp-uniform)" } else { "" },
            r.statements
        );
    }
    let (mut exact, mut assumed, mut unresolved) = (0, 0, 0);
    for f in imported.facts.list() {
        let at = imported.origin(f);
        match &f.status {
            Status::Exact => {
                exact += 1;
                noteln!("  exact       {at:<28} {}", f.what);
            }
            Status::Assumed(why) => {
                assumed += 1;
                noteln!("  assumed     {at:<28} {}: {why}", f.what);
            }
            Status::Unresolved(why) => {
                unresolved += 1;
                noteln!("  unresolved  {at:<28} {}: {why}", f.what);
            }
        }
    }
    let dropped: usize = imported.facts.dropped.values().sum();
    let by: Vec<String> = imported.facts.dropped.iter().map(|(k, v)| format!("{k} {v}")).collect();
    noteln!(
        "  dropped {dropped} data-path instruction(s){}",
        if by.is_empty() {
            String::new()
        } else {
            format!(" ({})", by.join(", "))
        }
    );
    noteln!("import: {exact} exact, {assumed} assumed, {unresolved} unresolved");
    match &a.out {
        Some(path) => {
            if let Err(e) = phasecheck_model::io::write_atomic(path, imported.spec.as_bytes()) {
                noteln!("{}: error: cannot write it: {e}", path.display());
                return ExitCode::from(2);
            }
        }
        None => say!("{}", imported.spec),
    }
    if unresolved > 0 {
        noteln!("import: {unresolved} fact(s) unresolved: the spec leaves them out (exit 3)");
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}
