//! The documentation is part of the product: a fresh clone must hold everything a user needs,
//! and the examples it shows must be what phasecheck really accepts and finds.
//!
//! - Every code block fenced as ```` ```phase ```` in README.md and docs/**/*.md is a complete
//!   spec: it must parse, pass the static checks, lower, and (being small) be checked
//!   exhaustively with exactly the kinds its `expect` line names found.
//! - No Markdown link in the repository's Markdown files leaves the repository: no URL, no
//!   absolute path, no `..` climbing above the root, and every target exists.

use phasecheck_model::lang;
use phasecheck_model::rt::Model;
use phasecheck_model::ViolationKind;
use phasecheck_verifier::{check, CheckOptions, Verdict};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `*.md` under `dir` (recursively), skipping build output and hidden folders.
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if p.is_dir() {
            markdown_under(&p, out);
        } else if name.ends_with(".md") {
            out.push(p);
        }
    }
}

fn all_markdown() -> Vec<PathBuf> {
    let mut v = Vec::new();
    markdown_under(&root(), &mut v);
    v.sort();
    v
}

/// The bodies of the blocks fenced as `phase`, with the 1-based line of their first line.
fn phase_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match &mut cur {
            None if t.starts_with("```") && t[3..].trim() == "phase" => cur = Some((i + 2, String::new())),
            None => {}
            Some(_) if t.starts_with("```") => out.push(cur.take().unwrap()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(cur.is_none(), "an unterminated ```phase block");
    out
}

#[test]
fn every_phase_block_of_the_docs_is_a_spec_that_finds_what_it_expects() {
    let mut files = vec![root().join("README.md")];
    let mut docs = Vec::new();
    markdown_under(&root().join("docs"), &mut docs);
    docs.sort();
    files.extend(docs);
    let mut checked = 0;
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (line, body) in phase_blocks(&text) {
            let at = format!("{}:{line}", f.strip_prefix(root()).unwrap().display());
            let name = at.clone();
            let ast = match lang::parse(&body) {
                Ok(a) => a,
                Err(d) => {
                    failures.push(d.render(&name, &body));
                    continue;
                }
            };
            if let Err(d) = lang::check(&ast) {
                failures.push(d.render(&name, &body));
                continue;
            }
            let proto = match phasecheck_model::program::lower::lower(&ast, &[]) {
                Ok(p) => p,
                Err(d) => {
                    failures.push(d.render(&name, &body));
                    continue;
                }
            };
            let r = check(
                &Model::new(proto.clone()),
                &CheckOptions {
                    max_states: Some(200_000),
                    ..Default::default()
                },
            );
            let found: BTreeSet<ViolationKind> = r.violations.iter().map(|v| v.kind).collect();
            let want: BTreeSet<ViolationKind> = proto.expect.clone().unwrap_or_default().into_iter().collect();
            let ok = match r.verdict {
                Verdict::Incomplete | Verdict::InternalError => false,
                Verdict::Holds => want.is_empty(),
                Verdict::Violated => found == want,
            };
            if !ok {
                failures.push(format!(
                    "{at}: protocol {} expects {:?} but the search found {:?} ({:?})",
                    proto.name, want, found, r.verdict
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The language and semantics pages each carry several examples; a fence renamed by mistake
    // would otherwise make this test vacuous.
    assert!(checked >= 6, "only {checked} ```phase blocks found");
}

/// Markdown link targets `[text](target)` of `text`, outside code spans and code blocks.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        // Drop inline code, where `](` may appear as text.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(p) = rest.find("](") {
            let after = &rest[p + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push((i + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn no_markdown_link_leaves_the_repository() {
    let root = root();
    let files = all_markdown();
    assert!(files.iter().any(|f| f.ends_with("docs/language.md")), "docs/language.md is missing");
    assert!(
        files.iter().any(|f| f.ends_with("docs/semantics.md")),
        "docs/semantics.md is missing"
    );
    let mut bad = Vec::new();
    let mut seen = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        for (k, line) in text.lines().enumerate() {
            if line.contains("../shared") || line.contains("/work/shared") {
                bad.push(format!("{rel}:{}: names a file outside the repository", k + 1));
            }
        }
        for (line, target) in links(&text) {
            seen += 1;
            let path = target.split('#').next().unwrap();
            let at = format!("{rel}:{line}: link `{target}`");
            if target.contains("://") || target.starts_with("mailto:") {
                bad.push(format!("{at} leaves the repository"));
                continue;
            }
            if path.is_empty() {
                continue; // an anchor on the same page
            }
            if path.starts_with('/') {
                bad.push(format!("{at} is absolute"));
                continue;
            }
            // Resolve lexically: a `..` above the root leaves the repository even when the
            // file happens to exist on this machine.
            let mut depth: Vec<String> = f
                .parent()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            let mut escaped = false;
            for c in Path::new(path).components() {
                match c {
                    Component::ParentDir => {
                        if depth.pop().is_none() {
                            escaped = true;
                        }
                    }
                    Component::Normal(n) => depth.push(n.to_string_lossy().to_string()),
                    _ => {}
                }
            }
            if escaped {
                bad.push(format!("{at} climbs out of the repository"));
                continue;
            }
            let resolved = depth.iter().fold(root.clone(), |p, c| p.join(c));
            if !resolved.exists() {
                bad.push(format!("{at} points at nothing"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(seen > 10, "only {seen} links found: the link scanner is broken");
}

#[test]
fn the_link_scanner_sees_links_and_skips_code() {
    let t = "see [a](docs/a.md) and `[b](c)`\n```\n[x](../y)\n```\n[u](https://example.com#x)\n";
    assert_eq!(
        links(t),
        vec![(1, "docs/a.md".to_string()), (5, "https://example.com#x".to_string())]
    );
}
