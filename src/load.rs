//! The CLI's inputs: folder expansion, loading many specs at once (nothing is checked unless all
//! are good), and `--param` values.

use std::path::PathBuf;

pub use phasecheck_model::spec::{load, Spec};

/// Every `*.phase` file named or below a named folder; each symbolic link to a folder the walk
/// skipped is noted on stderr through the CLI's escaping print, since a file name may hold any
/// byte a terminal would obey.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let (files, skipped) = phasecheck_model::spec::expand_noting_skipped(paths)?;
    for s in skipped {
        crate::noteln!("{}", phasecheck_model::spec::skipped_link_note(&s));
    }
    Ok(files)
}

/// Load every file, or report every bad one: nothing is checked unless all inputs are good.
pub fn load_all(paths: &[PathBuf], overrides: &[(String, i64)]) -> Result<Vec<Spec>, String> {
    let files = expand(paths)?;
    let mut specs = Vec::new();
    let mut errors = String::new();
    for f in &files {
        crate::limits::loaded(Some(&f.display().to_string()));
        match load(f, overrides) {
            Ok(s) => specs.push(s),
            Err(e) => errors.push_str(&e),
        }
    }
    crate::limits::loaded(None);
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
    let bad = || format!("`{value}` is not an integer (decimal, 0x hex, `_` separators, one leading `-`)");
    let v = value.trim().replace('_', "");
    let (neg, digits) = match v.strip_prefix('-') {
        Some(d) => (true, d.to_string()),
        None => (false, v.clone()),
    };
    let (radix, digits) = match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        Some(h) => (16, h),
        None => (10, digits.as_str()),
    };
    // Digits only: `from_str_radix` would also take a second sign (`--1`, `-+1`).
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(bad());
    }
    let magnitude = u64::from_str_radix(digits, radix).map_err(|_| bad())?;
    let parsed = if neg {
        0i64.checked_sub_unsigned(magnitude).ok_or_else(bad)?
    } else {
        i64::try_from(magnitude).map_err(|_| bad())?
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("`{s}` names no parameter: write NAME=VALUE"));
    }
    Ok((name.to_string(), parsed))
}

#[cfg(test)]
mod tests {
    use super::parse_override;

    #[test]
    fn param_values_take_one_sign_and_the_language_digits() {
        assert_eq!(parse_override("X=-1"), Ok(("X".into(), -1)));
        assert_eq!(parse_override("X=0x_ff"), Ok(("X".into(), 255)));
        assert_eq!(parse_override("X=1_000"), Ok(("X".into(), 1000)));
        assert_eq!(parse_override("X=-9223372036854775808"), Ok(("X".into(), i64::MIN)));
        for bad in [
            "X=--1",
            "X=-+1",
            "X=+1",
            "X=",
            "X=-",
            "X=0x",
            "X=9223372036854775808",
            "X=1e3",
            "=1",
            "X=0x-1",
        ] {
            assert!(parse_override(bad).is_err(), "{bad} accepted");
        }
    }
}
