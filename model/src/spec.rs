//! A spec file from disk to an executable protocol: read, parse, check, lower. Every failure is
//! a rendered diagnostic (file:line:col, caret, one sentence), ready to print.

use crate::lang::{self, ast, Diagnostic};
use crate::program::ir::Protocol;
use crate::program::lower::lower;
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
    let source = read_source(path, &display)?;
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

/// Largest spec file read: a spec is a small text file (the library's largest is a few KiB), so
/// more is bad input, not a reason to read without end (`check /dev/zero`).
pub const MAX_SPEC_BYTES: usize = 1 << 20;

/// The text of a spec file: at most [`MAX_SPEC_BYTES`], UTF-8 (a byte that is not is reported
/// with its line and column, as any other bad character).
pub fn read_source(path: &Path, display: &str) -> Result<String, String> {
    let bytes = crate::io::read_regular(path, MAX_SPEC_BYTES as u64, display).map_err(|e| {
        if e.contains("larger than") {
            format!(
                "error: {display} is larger than {} MiB; a spec is a small text file\n",
                MAX_SPEC_BYTES >> 20
            )
        } else {
            format!("error: {e}\n")
        }
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[at];
        let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
        // The lossy text keeps every byte before `at`: positions agree up to the bad byte.
        Diagnostic::new(
            "E001",
            lang::ast::Span::new(at, at + '\u{fffd}'.len_utf8()),
            format!("the byte 0x{byte:02X} is not UTF-8; a spec is UTF-8 text"),
        )
        .render(display, &text)
    })
}

/// Every `*.phase` file named, or below a named folder (sorted within each folder). Folder walks
/// do not follow symbolic links to folders (two links to `.` would make the walk exponential);
/// each one skipped is noted on stderr.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let (files, skipped) = expand_noting_skipped(paths)?;
    for s in skipped {
        eprintln!("{}", skipped_link_note(&s));
    }
    Ok(files)
}

/// The note for a symbolic link to a folder that a walk skipped (one line, no newline).
pub fn skipped_link_note(link: &Path) -> String {
    format!(
        "note: skipped {}: a symbolic link to a folder (folder walks do not follow links)",
        link.display()
    )
}

/// [`expand`], returning the symbolic links to folders it skipped instead of printing them.
pub fn expand_noting_skipped(paths: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    /// The error names the folder that could not be read, which may lie deep below the one given.
    fn walk(dir: &Path, out: &mut Vec<PathBuf>, skipped: &mut Vec<PathBuf>) -> Result<(), String> {
        let cannot = |e: std::io::Error| format!("error: cannot read folder {}: {e}\n", dir.display());
        for entry in std::fs::read_dir(dir).map_err(cannot)? {
            let entry = entry.map_err(cannot)?;
            let path = entry.path();
            // `file_type` does not follow links: a linked folder is seen as a link.
            let ty = entry.file_type().map_err(cannot)?;
            if ty.is_dir() {
                walk(&path, out, skipped)?;
            } else if ty.is_symlink() && path.is_dir() {
                skipped.push(path);
            } else if path.extension().is_some_and(|e| e == "phase") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, &mut skipped)?;
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
    skipped.sort();
    Ok((out, skipped))
}
