//! All static problems of a file at once: the check resumes after each problem, does not echo
//! one mistake as several (a `let` whose statement failed is still declared), and reports them
//! in source order; `check` is the first of them.

use phasecheck_model::lang::{check, check_all, parse};

#[test]
fn every_problem_of_a_body_in_source_order() {
    let src = "protocol bad\nbarrier full count 1\nbuffer slot bytes 64\nrole producer[1] {\n  let t = arrive(ful)\n  wait(full, t)\n  write(slott, 1)\n  wait_parity(slot, 0)\n}\ncompletion c { arrive(nope) }\n";
    let p = parse(src).unwrap();
    let all = check_all(&p);
    let got: Vec<(&str, usize)> = all
        .iter()
        .map(|d| (d.code, src[..d.span.start as usize].matches('\n').count() + 1))
        .collect();
    assert_eq!(got, [("E021", 5), ("E021", 7), ("E023", 8), ("E021", 10)]);
    assert_eq!(check(&p).unwrap_err().code, "E021");
}

#[test]
fn a_duplicate_declaration_stops_the_check() {
    let src = "protocol p\nbarrier b count 1\nbarrier b count 2\nrole r[1] { arrive(x) }\n";
    let all = check_all(&parse(src).unwrap());
    assert_eq!(all.iter().map(|d| d.code).collect::<Vec<_>>(), ["E020"]);
}

#[test]
fn at_most_max_errors() {
    let mut src = String::from("protocol p\nrole r[1] {\n");
    for i in 0..50 {
        src.push_str(&format!("  arrive(missing{i})\n"));
    }
    src.push_str("}\n");
    assert_eq!(check_all(&parse(&src).unwrap()).len(), phasecheck_model::lang::check::MAX_ERRORS);
}

/// Syntax errors inside bodies are all reported: the rest of the failed statement is skipped and
/// parsing resumes at the next one, also inside nested blocks; `parse` is the first of them.
#[test]
fn every_syntax_error_of_the_bodies() {
    use phasecheck_model::lang::parse_all;
    let src = "protocol syn\nbarrier full count 1\nrole p[1] {\n  arrive(full))\n  wait_parity(full 0)\n  if x { arrive(full) ) }\n  work\n}\nrole q[1] { let = 3 }\n";
    let errs = parse_all(src).unwrap_err();
    let lines: Vec<usize> = errs
        .iter()
        .map(|d| src[..d.span.start as usize].matches('\n').count() + 1)
        .collect();
    assert_eq!(lines, [4, 5, 6, 9]);
    assert!(errs.iter().all(|d| d.code == "E005"));
    assert_eq!(parse(src).unwrap_err().span, errs[0].span);
    // A clean file still parses, and an error outside any body stays alone.
    assert!(parse_all("protocol ok\nrole r[1] { work }\n").is_ok());
    assert_eq!(
        parse_all("protocol p\nbarrier b count\nrole r[1] { arrive(b)) }\n")
            .unwrap_err()
            .len(),
        1
    );
}
