//! Every file in tests/malformed is rejected by `parse` + `check`, with the code its second
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
                Ok(()) => panic!("{name} was accepted"),
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
