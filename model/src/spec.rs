//! A spec file from disk to an executable protocol: read, parse, check, lower. Every failure is
//! a rendered diagnostic (file:line:col, caret, one sentence), ready to print.

use crate::ir::Protocol;
use crate::lang::{self, ast, Diagnostic};
use crate::lower::lower;
use std::path::{Path, PathBuf};

pub struct Spec {
    pub path: PathBuf,
    /// The path as the user wrote it, for messages.
    pub display: String,
    pub source: String,
    pub ast: ast::Program,
    pub proto: Protocol,
}

/// Load one file. `overrides` (`--param NAME=VALUE`) apply to the params this file declares; an
/// override no file declares is the caller's error to report.
pub fn load(path: &Path, overrides: &[(String, i64)]) -> Result<Spec, String> {
    let display = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {display}: {e}\n"))?;
    let render = |d: Diagnostic| d.render(&display, &source);
    let ast = lang::parse(&source).map_err(render)?;
    lang::check(&ast).map_err(render)?;
    let mine: Vec<(String, i64)> = overrides
        .iter()
        .filter(|(n, _)| ast.params().any(|p| &p.name.name == n))
        .cloned()
        .collect();
    let proto = lower(&ast, &mine).map_err(render)?;
    Ok(Spec {
        path: path.to_path_buf(),
        display,
        source,
        ast,
        proto,
    })
}
