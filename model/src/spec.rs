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
    // Every problem at once (rustc-style), so that one round of edits fixes them all: the
    // syntax errors of the bodies, else every static problem.
    let checked = match lang::parse_all(&source) {
        Ok(ast) => match lang::check_all(&ast) {
            problems if problems.is_empty() => Ok(ast),
            problems => Err(problems),
        },
        Err(errors) => Err(errors),
    };
    let ast = checked.map_err(|problems| {
        let mut out = problems.iter().map(|d| d.render(&display, &source)).collect::<Vec<_>>().join("\n");
        if problems.len() > 1 {
            out.push_str(&format!("\nerror: {display}: {} problems; nothing was checked\n", problems.len()));
        }
        out
    })?;
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

/// Every `*.phase` file named, or below a named folder (sorted within each folder).
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
            walk(p, &mut found).map_err(|e| format!("error: cannot read folder {}: {e}\n", p.display()))?;
            if found.is_empty() {
                return Err(format!("error: no *.phase files under {}\n", p.display()));
            }
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("error: {}: no such file or folder\n", p.display()));
        }
    }
    Ok(out)
}
