//! CUDA generation and GPU runs (issue 4): every spec becomes a kernel (`codegen`), compiled with
//! NVRTC (`nvrtc`), run on the GPU through cudarc (`sys` holds every raw call, `device` the safe
//! layer), and compared with the model (`runner`, `report`).

pub mod codegen;
pub mod nvrtc;
pub mod outcome;
pub mod runner;
pub mod sys;

use phasecheck_model::ir::Protocol;
use phasecheck_model::lang::{self, ast};
use phasecheck_model::lower::lower;
use std::path::{Path, PathBuf};

/// A parsed, checked and lowered spec file.
pub struct LoadedSpec {
    pub path: PathBuf,
    pub display: String,
    pub source: String,
    pub ast: ast::Program,
    pub proto: Protocol,
}

/// Parse, check and lower one file; `overrides` apply to the params it declares.
pub fn load_spec(path: &Path, overrides: &[(String, i64)]) -> Result<LoadedSpec, String> {
    let display = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {display}: {e}"))?;
    let render = |d: lang::Diagnostic| d.render(&display, &source);
    let ast = lang::parse(&source).map_err(render)?;
    lang::check(&ast).map_err(render)?;
    let mine: Vec<(String, i64)> = overrides
        .iter()
        .filter(|(n, _)| ast.params().any(|p| &p.name.name == n))
        .cloned()
        .collect();
    let proto = lower(&ast, &mine).map_err(render)?;
    Ok(LoadedSpec {
        path: path.to_path_buf(),
        display,
        source,
        ast,
        proto,
    })
}

/// Every `*.phase` file named or below the named folders (sorted within a folder).
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "phase") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).map_err(|e| format!("error: cannot read folder {}: {e}", p.display()))?;
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("error: {}: no such file or folder", p.display()));
        }
    }
    Ok(out)
}
