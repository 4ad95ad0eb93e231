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
