//! The CLI's inputs: folder expansion, loading many specs at once (nothing is checked unless all
//! are good), and `--param` values.

use std::path::{Path, PathBuf};

pub use phasecheck_model::spec::{load, Spec};

/// All `*.phase` files named or below the named folders, sorted within each folder.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).map_err(|e| format!("error: cannot read folder {}: {e}\n", p.display()))?;
            found.sort();
            if found.is_empty() {
                return Err(format!("error: no *.phase files under {}\n", p.display()));
            }
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("error: {}: no such file or folder\n", p.display()));
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
