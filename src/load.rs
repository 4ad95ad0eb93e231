//! The CLI's inputs: folder expansion, loading many specs at once (nothing is checked unless all
//! are good), and `--param` values.

use std::path::PathBuf;

pub use phasecheck_model::spec::{expand, load, Spec};

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
