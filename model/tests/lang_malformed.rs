//! Every file in tests/malformed is rejected by the front end (`parse`, `check`, then the
//! lowering, which rejects what needs the roles' sizes, as E113 does), with the code its second
//! comment line names (`// error: E0xx`).

use phasecheck_model::lang::{check, parse};
use std::path::Path;

#[test]
fn every_malformed_file_is_rejected_with_its_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/malformed");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "phase"))
        .collect();
    files.sort();
    assert!(files.len() >= 12, "only {} malformed files", files.len());
    let mut codes = std::collections::BTreeSet::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let mut lines = src.lines();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("// wrong: ")),
            "{name}: first line says what is wrong"
        );
        let want = lines
            .next()
            .and_then(|l| l.strip_prefix("// error: "))
            .unwrap_or_else(|| panic!("{name}: second line is `// error: E0xx`"))
            .trim()
            .to_string();
        let got = match parse(&src) {
            Err(d) => d,
            Ok(p) => match check(&p) {
                Err(d) => d,
                Ok(()) => match phasecheck_model::program::lower::lower(&p, &[]) {
                    Err(d) => d,
                    Ok(_) => panic!("{name} was accepted"),
                },
            },
        };
        let rendered = got.render(&name, &src);
        assert_eq!(got.code, want, "{name}:\n{rendered}");
        // The caret points past the two comment lines, at real code.
        let (line, _) = got.position(&src);
        assert!(line >= 3, "{name}: points at line {line}:\n{rendered}");
        codes.insert(got.code);
    }
    assert!(codes.len() >= 12, "the files cover only {codes:?}");
}

/// The front end is total on cut-off files: every library spec cut right after any punctuation
/// the parser looks past (`(`, `,`, `=`, `.`, `-`) or at any line end is rejected with a
/// diagnostic whose span lies inside the text, or accepted; never a panic. An editor saves files
/// half typed, and the parser's look-ahead meets the end of the tokens exactly there.
#[test]
fn every_cut_off_library_spec_is_a_diagnostic_not_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut stack = vec![root];
    let mut cuts = 0usize;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "phase") {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            for (i, c) in src.char_indices() {
                if !matches!(c, '(' | ',' | '=' | '.' | '-' | '\n') {
                    continue;
                }
                let cut = &src[..i + c.len_utf8()];
                cuts += 1;
                let outcome = std::panic::catch_unwind(|| match parse(cut) {
                    Err(d) => Some(d),
                    Ok(prog) => check(&prog).err(),
                });
                match outcome {
                    Err(_) => panic!("{}: the parser panicked on the file cut at byte {}", p.display(), i + 1),
                    Ok(Some(d)) => {
                        let _ = d.render("cut.phase", cut);
                    }
                    Ok(None) => {}
                }
            }
        }
    }
    assert!(cuts > 10_000, "only {cuts} cuts");
}

/// Operator depth of an expression tree (a walk over it recurses this deep).
fn tree_depth(e: &phasecheck_model::lang::ast::Expr) -> usize {
    use phasecheck_model::lang::ast::ExprKind;
    match &e.kind {
        ExprKind::Unary(_, x) => 1 + tree_depth(x),
        ExprKind::Binary(_, a, b) => 1 + tree_depth(a).max(tree_depth(b)),
        _ => 0,
    }
}

/// The parser's depth bound holds for the tree it returns, whatever mix of unary and binary
/// operators builds it: an accepted `param` never has an operator tree deeper than 200 (the bound
/// that keeps every later walk off the end of the stack), and expressions just inside it are
/// accepted, so the bound is not refusing everything.
#[test]
fn no_accepted_expression_is_deeper_than_the_parser_bound() {
    let mut accepted_near_bound = 0;
    for unary in [0usize, 1, 2, 30, 120] {
        for binary in [0usize, 60, 150, 170, 185, 199, 200, 240] {
            let expr = format!("{}1{}", "-".repeat(unary), " + 1".repeat(binary));
            let src = format!("protocol p\nparam P = {expr}\nbarrier b count 1\nrole r[1] {{\n  arrive(b)\n}}\n");
            let Ok(prog) = parse(&src) else { continue };
            let value = prog
                .items
                .iter()
                .find_map(|i| match i {
                    phasecheck_model::lang::ast::Item::Param(p) => Some(&p.value),
                    _ => None,
                })
                .expect("the param");
            let depth = tree_depth(value);
            assert!(
                depth <= 200,
                "{unary} unary and {binary} binary operators accepted at depth {depth}"
            );
            accepted_near_bound += usize::from(depth >= 180);
        }
    }
    assert!(accepted_near_bound > 0, "nothing near the bound was accepted");
}
