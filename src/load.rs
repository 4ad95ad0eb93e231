//! Reading spec files: folder expansion, parsing, static checks and lowering, with every failure
//! rendered as a positioned diagnostic (bad input, exit 2).

use phasecheck_model::ir::Protocol;
use phasecheck_model::lang::{self, ast, Diagnostic};
use phasecheck_model::lower::lower;
use std::path::{Path, PathBuf};

pub struct Spec {
    pub path: PathBuf,
    pub display: String,
    pub source: String,
    pub ast: ast::Program,
    pub proto: Protocol,
}

/// All `*.phase` files named or below the named folders, sorted within each folder.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).map_err(|e| format!("error: cannot read folder {}: {e}", p.display()))?;
            found.sort();
            if found.is_empty() {
                return Err(format!("error: no *.phase files under {}", p.display()));
            }
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("error: {}: no such file or folder", p.display()));
        }
    }
    Ok(out)
}

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

/// Parse, check and lower one file. `overrides` apply to the params this file declares; the
/// caller checks that each override is declared by at least one file.
pub fn load(path: &Path, overrides: &[(String, i64)]) -> Result<Spec, String> {
    let display = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {display}: {e}"))?;
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

/// Load every file, or report every bad one: nothing is checked unless all inputs are good.
pub fn load_all(paths: &[PathBuf], overrides: &[(String, i64)]) -> Result<Vec<Spec>, String> {
    let files = expand(paths)?;
    let mut specs = Vec::new();
    let mut errors = String::new();
    for f in &files {
        match load(f, overrides) {
            Ok(s) => specs.push(s),
            Err(e) => errors.push_str(&e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for (name, _) in overrides {
        if !specs.iter().any(|s| s.ast.params().any(|p| &p.name.name == name)) {
            return Err(format!(
                "error[E100]: `--param {name}` names no parameter of any checked protocol\n"
            ));
        }
    }
    Ok(specs)
}

/// `NAME=VALUE` with the language's integer syntax (decimal, hex, `_` separators, leading `-`).
pub fn parse_override(s: &str) -> Result<(String, i64), String> {
    let (name, value) = s.split_once('=').ok_or_else(|| format!("`{s}` is not NAME=VALUE"))?;
    let v = value.trim().replace('_', "");
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d.to_string()),
        None => (false, v.clone()),
    };
    let parsed = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(h) => i64::from_str_radix(h, 16),
        None => digits.parse::<i64>(),
    }
    .map_err(|_| format!("`{value}` is not an integer (decimal, 0x hex, `_` separators)"))?;
    Ok((name.trim().to_string(), if neg { -parsed } else { parsed }))
}
