//! Inline functions are expanded at lowering, and what they mean does not depend on how many
//! calls came before: a name argument is passed by reference (the function's assignments reach
//! the caller's local), any other argument by value, and any number of calls one after another
//! lowers (the nesting guard counts depth, not calls).

use phasecheck_model::lang;
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;

/// Lower `body` as the only role of a protocol and run its one thread to the end; the violations
/// (an `assert` that failed, a fault) it met, by message.
fn run(fns: &str, body: &str) -> Result<Vec<String>, String> {
    let src = format!("protocol calls\n{fns}\nrole r[1] {{\n{body}\n}}\n");
    let ast = lang::parse(&src).map_err(|d| d.message.clone())?;
    lang::check(&ast).map_err(|d| d.message.clone())?;
    let model = Model::new(lower(&ast, &[]).map_err(|d| d.message.clone())?);
    let init = model.init();
    let mut seen: Vec<String> = init.violations.iter().map(|v| v.message.clone()).collect();
    // An assert that fails in the local code before the first visible step ends it at once.
    let Some(mut s) = init.next else { return Ok(seen) };
    let mut en = Vec::new();
    loop {
        en.clear();
        model.actions(&s, &mut en);
        let Some(&a) = en.first() else { break };
        let o = model.step(&s, a);
        seen.extend(o.violations.iter().map(|v| v.message.clone()));
        match o.next {
            Some(n) => s = n,
            None => break,
        }
    }
    Ok(seen)
}

const BUMP: &str = "fn bump(x) {\n  x = x + 1\n}";

#[test]
fn a_name_argument_is_passed_by_reference_and_an_expression_by_value() {
    let by_ref = run(BUMP, "  let n = 1\n  bump(n)\n  assert(n == 2)\n  work").unwrap();
    assert!(by_ref.is_empty(), "{by_ref:?}");
    let by_value = run(BUMP, "  let n = 1\n  bump(n + 0)\n  assert(n == 1)\n  work").unwrap();
    assert!(by_value.is_empty(), "{by_value:?}");
    let wrong = run(BUMP, "  let n = 1\n  bump(n)\n  assert(n == 1)\n  work").unwrap();
    assert_eq!(wrong.len(), 1, "the failed assert is seen: {wrong:?}");
}

#[test]
fn any_number_of_calls_in_a_row_lowers() {
    let calls = "  bump(n)\n".repeat(100);
    let seen = run(BUMP, &format!("  let n = 0\n{calls}  assert(n == 100)\n  work")).unwrap();
    assert!(seen.is_empty(), "{seen:?}");
}

#[test]
fn a_call_with_the_wrong_number_of_arguments_is_an_error() {
    let e = run(BUMP, "  let n = 1\n  bump(n, n)\n  work").unwrap_err();
    assert!(e.contains("bump"), "{e}");
}

/// Calls nest at most 64 deep; a deeper chain (no recursion) is refused with the nesting code,
/// E038, not the arity code E037 (the advice differs: flatten the chain, or fix the call).
#[test]
fn a_call_chain_past_the_nesting_bound_is_refused_as_too_deep() {
    let chain = |n: usize| -> String {
        let mut fns = String::new();
        for i in 0..n {
            fns.push_str(&format!("fn f{i}(x) {{\n  f{}(x)\n}}\n", i + 1));
        }
        fns.push_str(&format!("fn f{n}(x) {{\n  x = x + 1\n}}\n"));
        fns
    };
    let lowered = |n: usize| {
        let src = format!("protocol calls\n{}role r[1] {{\n  let v = 0\n  f0(v)\n  work\n}}\n", chain(n));
        let ast = lang::parse(&src).unwrap();
        lang::check(&ast).unwrap();
        lower(&ast, &[]).map(|_| ()).map_err(|d| d.code)
    };
    assert_eq!(lowered(10), Ok(()));
    assert_eq!(lowered(70), Err("E038"));
}
