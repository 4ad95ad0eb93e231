//! Each diagnostic code: the code, where it points (line:col), and the advice it gives.

use phasecheck_model::lang::{check, parse, Diagnostic};

fn first_error(src: &str) -> Diagnostic {
    match parse(src) {
        Err(d) => d,
        Ok(p) => match check(&p) {
            Err(d) => d,
            Ok(()) => panic!("accepted:\n{src}"),
        },
    }
}

/// Asserts code and position of the first error, and returns its message.
#[track_caller]
fn rejects(src: &str, code: &str, line: usize, col: usize) -> String {
    let d = first_error(src);
    let rendered = d.render("t.phase", src);
    assert_eq!((d.code, d.position(src)), (code, (line, col)), "\n{rendered}");
    assert!(!d.message.contains('\n'), "one sentence: {}", d.message);
    d.message
}

const HEAD: &str =
    "protocol p\nparam N = 2\nbarrier full[N] count 1\nbarrier done count 1\nbuffer slot[N] bytes 64\nbuffer one bytes 64\nvar ctrl = 0\n";

/// `HEAD` plus a role whose body is `body`; the body's first line is line 9.
fn in_role(body: &str) -> String {
    format!("{HEAD}role w[2] {{\n{body}\n}}\n")
}

#[test]
fn e001_bad_character() {
    let m = rejects(&in_role("  let x = 1 & 2"), "E001", 9, 13);
    assert!(m.contains("`&&`"), "{m}");
    rejects("protocol p\nrole w[1] { let s = \"a\" }\n", "E001", 2, 21);
}

#[test]
fn e002_unterminated_block_comment() {
    rejects("protocol p\n/* role w[1] { work }\n", "E002", 2, 1);
}

#[test]
fn e003_bad_integer_literal() {
    let m = rejects("protocol p\nparam A = 0xZZ\nrole w[1] { work }\n", "E003", 2, 11);
    assert!(m.contains("0x"), "{m}");
    rejects("protocol p\nparam A = 12abc\n", "E003", 2, 11);
    rejects("protocol p\nparam A = 9223372036854775808\n", "E003", 2, 11);
}

#[test]
fn e004_missing_protocol_header() {
    let m = rejects("// a spec\n\nparam A = 1\nrole w[1] { work }\n", "E004", 3, 1);
    assert!(m.contains("protocol NAME"), "{m}");
    rejects("", "E004", 1, 1);
}

#[test]
fn e005_syntax_errors() {
    rejects(&in_role("  for i 0..N { }"), "E005", 9, 9);
    rejects(&in_role("  let x = (1 + 2"), "E005", 10, 1);
    rejects("protocol p\nrole w { work }\n", "E005", 2, 8);
    rejects("protocol p\nrole w[1] { work\n", "E005", 2, 11);
    let m = rejects("protocol p\nbarier b count 1\n", "E005", 2, 1);
    assert!(m.contains("did you mean `barrier`?"), "{m}");
    let m = rejects("protocol p\nlet x = 1\n", "E005", 2, 1);
    assert!(m.contains("inside a `role`"), "{m}");
    let m = rejects("protocol p\nbarrier b count 1 manualinit\n", "E005", 2, 19);
    assert!(m.contains("did you mean `manual_init`?"), "{m}");
    rejects(&in_role("  work work"), "E005", 9, 8);
    rejects(&in_role("  let x = full.size"), "E005", 9, 16);
}

#[test]
fn e006_unknown_expect_kind() {
    let m = rejects("protocol p\nexpect deadlock, stale_wait\nrole w[1] { work }\n", "E006", 2, 18);
    assert!(m.contains("did you mean `stale-wait`?"), "{m}");
    let m = rejects("protocol p\nexpect racy\nrole w[1] { work }\n", "E006", 2, 8);
    assert!(m.contains("`data-race`") && m.contains("`deadlock`"), "lists the kinds: {m}");
}

#[test]
fn e007_wrong_arguments() {
    let m = rejects(&in_role("  wait(done)"), "E007", 9, 3);
    assert!(m.contains("`wait(B, token)`"), "{m}");
    rejects(&in_role("  arrive(done, 1, 2)"), "E007", 9, 19);
    let m = rejects(&in_role("  read(one, expected = 1)"), "E007", 9, 13);
    assert!(m.contains("did you mean `expect`?"), "{m}");
    rejects(&in_role("  copy_async(one, done, version = 1, version = 2)"), "E007", 9, 38);
    rejects(&in_role("  copy_async(one, version = 1, done)"), "E007", 9, 32);
    let m = rejects(&in_role("  syncwarp()"), "E007", 9, 11);
    assert!(m.contains("without parentheses"), "{m}");
}

#[test]
fn e008_operation_nested_in_expression() {
    rejects(&in_role("  let t = 1 + arrive(done)"), "E008", 9, 15);
    rejects(&in_role("  let t = arrive(done) + 1"), "E008", 9, 11);
    rejects(&in_role("  if try_wait(done, 0) == 1 { work }"), "E008", 9, 6);
    rejects(&in_role("  wait(done, arrive(done))"), "E008", 9, 14);
}

#[test]
fn e009_reserved_word_as_name() {
    let m = rejects("protocol p\nparam count = 1\n", "E009", 2, 7);
    assert!(m.contains("`count_`"), "{m}");
    rejects(&in_role("  let wait = 1"), "E009", 9, 7);
    rejects(&in_role("  let x = bytes"), "E009", 9, 11);
    rejects(&in_role("  role = 1"), "E009", 9, 3);
}

#[test]
fn e010_unknown_operation() {
    let m = rejects(&in_role("  arive(done)"), "E010", 9, 3);
    assert!(m.contains("did you mean `arrive`?"), "{m}");
    let m = rejects(&in_role("  arrive_wait(done)"), "E010", 9, 3);
    assert!(m.contains("did you mean `arrive_and_wait`?"), "{m}");
    let m = rejects(&in_role("  let x = min(1, 2)"), "E010", 9, 11);
    assert!(m.contains("no other calls"), "{m}");
}

#[test]
fn e011_repeated_header_or_attribute() {
    rejects("protocol p\nexpect holds\nexpect deadlock\n", "E011", 3, 1);
    rejects("protocol p\nprotocol q\n", "E011", 2, 1);
    rejects("protocol p\nwarp_size 4\nwarp_size 8\n", "E011", 3, 1);
    rejects("protocol p\nbarrier b count 1 manual_init manual_init\n", "E011", 2, 31);
    rejects("protocol p\nbarrier b count 1 completion f completion g\n", "E011", 2, 32);
}

#[test]
fn e012_uniform_on_a_role_counted_in_threads() {
    let m = rejects(
        "protocol p\nbarrier b count 4\nrole w[4] uniform {\n  arrive(b)\n}\n",
        "E012",
        3,
        11,
    );
    assert!(m.contains("`role w warps N uniform"), "{m}");
    // On whole-warp roles it is accepted, and only there.
    assert!(parse("protocol p\nrole w warps 1 uniform {\n  work\n}\nrole v warpgroups 1 uniform {\n  work\n}\n").is_ok());
}

#[test]
fn e020_duplicate_declaration() {
    let m = rejects(
        "protocol p\nbarrier b count 1\nbuffer b bytes 4\nrole w[1] { work }\n",
        "E020",
        3,
        8,
    );
    assert!(m.contains("a barrier"), "{m}");
    rejects(&in_role("  let x = 1\n  let x = 2"), "E020", 10, 7);
    rejects(&in_role("  let N = 1"), "E020", 9, 7);
    rejects(&in_role("  for i in 0..2 { let i = 1 }"), "E020", 9, 23);
    rejects(&in_role("  let tid = 1"), "E020", 9, 7);
    rejects("protocol p\nvar lane = 0\nrole w[1] { work }\n", "E020", 2, 5);
}

#[test]
fn locals_are_block_scoped() {
    // Siblings may reuse a name; a local is gone after its block.
    let ok = in_role("  if tid == 0 { let x = 1 } else { let x = 2 }\n  for i in 0..2 { let s = i }\n  for i in 0..2 { let s = i }");
    check(&parse(&ok).unwrap()).unwrap();
    rejects(&in_role("  if tid == 0 { let x = 1 }\n  assert x == 1"), "E021", 10, 10);
    rejects(&in_role("  for i in 0..2 { work }\n  assert i == 1"), "E021", 10, 10);
    rejects(&in_role("  let y = y"), "E021", 9, 11);
}

#[test]
fn e021_unknown_name() {
    let m = rejects(&in_role("  arrive(dnoe)"), "E021", 9, 10);
    assert!(m.contains("did you mean `done`?"), "{m}");
    let m = rejects(&in_role("  wait_parity(fulll[0], 0)"), "E021", 9, 15);
    assert!(m.contains("did you mean `full`?"), "{m}");
    let m = rejects(&in_role("  let x = ctr + 1"), "E021", 9, 11);
    assert!(m.contains("did you mean `ctrl`?"), "{m}");
    let m = rejects(&in_role("  cntrl = 1"), "E021", 9, 3);
    assert!(m.contains("did you mean `ctrl`?"), "{m}");
    rejects("protocol p\nparam A = B\nrole w[1] { work }\n", "E021", 2, 11);
    let m = rejects(&in_role("  let x = qqq"), "E021", 9, 11);
    assert!(!m.contains("did you mean"), "no far-fetched suggestion: {m}");
    // The typo distance at its edge: two edits from `ctrl` are a typo, three are another name
    // (even where three is at most half the name's length).
    let m = rejects(&in_role("  let x = cxtrxl"), "E021", 9, 11);
    assert!(m.contains("did you mean `ctrl`?"), "two edits away: {m}");
    let m = rejects(&in_role("  let x = cxtxrxl"), "E021", 9, 11);
    assert!(!m.contains("did you mean"), "three edits away is no typo: {m}");
}

#[test]
fn e022_assignment_to_read_only() {
    let m = rejects(&in_role("  N = 3"), "E022", 9, 3);
    assert!(m.contains("read-only"), "{m}");
    rejects(&in_role("  tid = 3"), "E022", 9, 3);
    rejects(&in_role("  for i in 0..N { i = 3 }"), "E022", 9, 19);
    rejects(&in_role("  done = 1"), "E022", 9, 3);
}

#[test]
fn e023_barrier_where_buffer_expected_and_back() {
    let m = rejects(&in_role("  arrive(one)"), "E023", 9, 10);
    assert!(m.contains("`one` is a buffer"), "{m}");
    rejects(&in_role("  read(done)"), "E023", 9, 8);
    let m = rejects(&in_role("  copy_async(full[0], slot[0])"), "E023", 9, 14);
    assert!(m.contains("first argument"), "{m}");
    rejects(&in_role("  let b = 0\n  inval(b)"), "E023", 10, 9);
    rejects(&in_role("  wait(ctrl, 0)"), "E023", 9, 8);
}

#[test]
fn e024_index_on_a_scalar() {
    rejects(&in_role("  arrive(done[0])"), "E024", 9, 15);
    rejects(&in_role("  write(one[tid], 1)"), "E024", 9, 13);
}

#[test]
fn e025_missing_index_on_an_array() {
    let m = rejects(&in_role("  arrive_expect_tx(full, 64)"), "E025", 9, 20);
    assert!(m.contains("`full[0]`"), "{m}");
    rejects(&in_role("  read(slot)"), "E025", 9, 8);
}

#[test]
fn e026_unknown_role_in_count() {
    let m = rejects(
        "protocol p\nbarrier b count consumers.count\nrole consumer[2] { work }\n",
        "E026",
        2,
        17,
    );
    assert!(m.contains("did you mean `consumer`?"), "{m}");
    rejects(&in_role("  let x = ctrl.count"), "E026", 9, 11);
}

#[test]
fn e027_let_of_an_operation_without_value() {
    let m = rejects(&in_role("  let t = wait_parity(done, 0)"), "E027", 9, 11);
    assert!(m.contains("statement on its own"), "{m}");
    rejects(&in_role("  ctrl = read(one)"), "E027", 9, 10);
}

#[test]
fn e028_completion_names_a_missing_function() {
    let m = rejects(
        "protocol p\nbarrier b count 1 completion rotat\ncompletion rotate { }\nrole w[1] { work }\n",
        "E028",
        2,
        30,
    );
    assert!(m.contains("did you mean `rotate`?"), "{m}");
    rejects("protocol p\nbarrier b count 1 completion f\nrole w[1] { work }\n", "E028", 2, 30);
    rejects(
        "protocol p\nvar f = 0\nbarrier b count 1 completion f\nrole w[1] { work }\n",
        "E028",
        3,
        30,
    );
}

#[test]
fn e029_thread_index_in_a_completion() {
    let m = rejects(
        "protocol p\nvar v = 0\ncompletion f { v = tid }\nrole w[1] { work }\n",
        "E029",
        3,
        20,
    );
    assert!(m.contains("no particular thread"), "{m}");
    rejects(
        "protocol p\ncompletion f { if lane == 0 { work } }\nrole w[1] { work }\n",
        "E029",
        2,
        19,
    );
}

#[test]
fn e030_warp_operation_in_a_completion() {
    let m = rejects(
        "protocol p\nbarrier b count 1\ncompletion f {\n  commit(b)\n}\nrole w[1] { work }\n",
        "E030",
        4,
        3,
    );
    assert!(m.contains("outside any warp"), "{m}");
    rejects("protocol p\ncompletion f { syncwarp }\nrole w[1] { work }\n", "E030", 2, 16);
}

#[test]
fn e031_no_role() {
    rejects("protocol lonely\nbarrier b count 1\n", "E031", 1, 10);
}

#[test]
fn e032_non_value_in_expression() {
    let m = rejects("protocol p\nbarrier b count consumer\nrole consumer[1] { work }\n", "E032", 2, 17);
    assert!(m.contains("`consumer.count`"), "{m}");
    rejects(&in_role("  let x = done + 1"), "E032", 9, 11);
    rejects("protocol p\ncompletion f { }\nrole w[1] { assert f }\n", "E032", 3, 20);
}

#[test]
fn e033_runtime_value_in_a_declaration() {
    let m = rejects("protocol p\nvar v = 1\nbarrier b count v\nrole w[1] { work }\n", "E033", 3, 17);
    assert!(m.contains("param"), "{m}");
    rejects("protocol p\nrole w[tid + 1] { work }\n", "E033", 2, 8);
}

#[test]
fn e034_params_depending_on_themselves() {
    let m = rejects("protocol p\nparam A = B + 1\nparam B = A * 2\nrole w[1] { work }\n", "E034", 2, 7);
    assert!(m.contains("A -> B -> A"), "{m}");
    rejects("protocol p\nrole w[w.count] { work }\n", "E034", 2, 6);
    // Acyclic references are fine, in any order.
    check(&parse("protocol p\nparam B = A * 2\nparam A = c.count\nrole c[3] { work }\n").unwrap()).unwrap();
}

/// The search for a circle among params visits each param once: a chain of 64 params, each
/// naming the one before it twice, checks at once, and a circle declared after the chain is still
/// found (a search that walked a finished param again would take 2^64 steps on the chain).
#[test]
fn e034_the_circle_search_visits_each_param_once() {
    let mut chain = String::from("protocol p\nparam P0 = 1\n");
    for i in 1..64 {
        chain.push_str(&format!("param P{i} = P{} - P{} + 1\n", i - 1, i - 1));
    }
    chain.push_str("role w[P63] { work }\n");
    let circle = format!("{chain}param A = B + P63\nparam B = A\n");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let chain_ok = check(&parse(&chain).unwrap()).is_ok();
        let circle_code = check(&parse(&circle).unwrap()).err().map(|d| d.code);
        let _ = tx.send((chain_ok, circle_code));
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("checking 64 chained params did not finish in 60 s");
    assert_eq!(got, (true, Some("E034")));
}

/// A byte order mark at the start of a file is not part of line 1: a diagnostic there shows the
/// line and puts its caret exactly as it would without the mark.
#[test]
fn a_byte_order_mark_is_neither_shown_nor_counted_in_a_diagnostic_on_line_one() {
    let src = "protocol p q\nrole w[1] { work }\n";
    let with_bom = format!("\u{feff}{src}");
    let (plain, marked) = (first_error(src), first_error(&with_bom));
    assert_eq!((marked.code, marked.position(&with_bom)), (plain.code, plain.position(src)));
    assert_eq!(plain.position(src).0, 1, "the example must fail on line 1");
    assert_eq!(marked.render("t.phase", &with_bom), plain.render("t.phase", src));
}

/// A `syncwarp(mask)` in a uniform role must name the whole warp as a constant: a mask read from a
/// local is a mask computed at run time (E112), even when the local holds every lane, while the
/// same value written in place is accepted.
#[test]
fn e112_a_uniform_roles_syncwarp_mask_read_from_a_local_is_computed_at_run_time() {
    use phasecheck_model::program::lower::lower;
    let src = "protocol p\nwarp_size 4\nrole w warps 1 uniform {\n  let m = 15\n  syncwarp(m)\n  work\n}\n";
    let ast = parse(src).unwrap();
    check(&ast).unwrap();
    let d = lower(&ast, &[]).expect_err("a mask from a local is not known to be the whole warp");
    assert_eq!((d.code, d.position(src)), ("E112", (5, 3)), "{}", d.render("t.phase", src));
    assert!(d.message.contains("names a mask computed at run time"), "{}", d.message);
    let literal = src.replace("syncwarp(m)", "syncwarp(15)");
    let ast = parse(&literal).unwrap();
    check(&ast).unwrap();
    lower(&ast, &[]).unwrap_or_else(|d| panic!("{}", d.render("t.phase", &literal)));
}

#[test]
fn diagnostics_render_with_a_caret() {
    let src = in_role("  arrive(dnoe)");
    let d = first_error(&src);
    let r = d.render("t.phase", &src);
    assert!(r.starts_with("error[E021]: "), "{r}");
    assert!(r.contains("t.phase:9:10"), "{r}");
    assert!(r.contains("  arrive(dnoe)\n") && r.contains("         ^^^^"), "{r}");
}

#[test]
fn e040_token_waited_on_another_barrier() {
    let m = rejects(&in_role("  let t = arrive(done)\n  wait(full[0], t)"), "E040", 10, 17);
    assert!(m.contains("`done`"), "{m}");
    // Assigned from two barriers on two paths: not known, not rejected.
    let ok = in_role("  let t = arrive(done)\n  if tid == 0 { t = arrive(full[0]) }\n  wait(done, t)");
    let p = phasecheck_model::lang::parse(&ok).expect("parses");
    assert!(phasecheck_model::lang::check_all(&p).is_empty());
    // Named barriers and cp.async are role operations (E030 in a completion body).
    rejects(
        "protocol p\nbarrier b count 1 completion c\ncompletion c { bar_arrive(1, 32) }\nrole w[1] { arrive(b) }\n",
        "E030",
        3,
        16,
    );
}

/// Every character that can reorder or break a terminal line (line and paragraph separators, the
/// bidirectional marks, embeddings, overrides and isolates, C0/C1 controls) reaches the rendered
/// diagnostic as `<U+XXXX>`, never raw, whether it sits in the source line shown or in the file
/// name; ordinary non-ASCII text passes unchanged.
#[test]
fn diagnostics_escape_every_character_that_reorders_or_breaks_a_line() {
    let unsafe_chars: Vec<char> = ['\u{2028}', '\u{2029}', '\u{200e}', '\u{200f}', '\u{1b}', '\u{7f}', '\u{85}']
        .into_iter()
        .chain('\u{202a}'..='\u{202e}')
        .chain('\u{2066}'..='\u{2069}')
        .collect();
    for c in unsafe_chars {
        let src = format!("protocol p\nbarrier b count 1\nrole r[1] {{\n  arrive(q) // note {c} here\n}}\n");
        let d = first_error(&src);
        let file = format!("t{c}.phase");
        let rendered = d.render(&file, &src);
        let escaped = format!("<U+{:04X}>", c as u32);
        assert!(!rendered.contains(c), "U+{:04X} reached the rendering raw:\n{rendered}", c as u32);
        assert_eq!(
            rendered.matches(&escaped).count(),
            2,
            "U+{:04X} not shown as {escaped} in the line and the name:\n{rendered}",
            c as u32
        );
    }
    let src = "protocol p\nbarrier b count 1\nrole r[1] {\n  arrive(q) // déjà vu, 同期\n}\n";
    let rendered = first_error(src).render("t.phase", src);
    assert!(rendered.contains("déjà vu, 同期"), "{rendered}");
}

/// A name close to a declared param gets the param's name as a hint; a name close to none gets
/// how to declare it. Both say which name is missing.
#[test]
fn e0_unknown_param_hints_the_close_name_or_how_to_declare_it() {
    let close = first_error("protocol p\nparam ROUNDS = 2\nbarrier b count ROUND\nrole r[1] {\n  arrive(b)\n}\n");
    assert!(close.message.contains("did you mean `ROUNDS`?"), "{}", close.message);
    assert!(!close.message.contains("declare it with"), "{}", close.message);
    let far = first_error("protocol p\nparam ROUNDS = 2\nbarrier b count QQQQQQ\nrole r[1] {\n  arrive(b)\n}\n");
    assert!(far.message.contains("declare it with `param QQQQQQ = ...`"), "{}", far.message);
}

/// `break` inside a `while` leaves that loop: it is accepted, as inside a `for`.
#[test]
fn break_inside_a_while_loop_is_accepted() {
    let src = "protocol p\nvar go = 1\nbarrier b count 1\nrole r[1] {\n  while go == 1 {\n    break\n  }\n  arrive(b)\n}\n";
    let prog = parse(src).expect("parses");
    check(&prog).unwrap_or_else(|d| panic!("{}", d.render("t.phase", src)));
}

/// Counters are named only by `atomic_add` and `read_counter`, which name nothing else: a
/// buffer holds versions, not a value an atomic could add to.
#[test]
fn e023_counters_and_buffers_are_not_interchangeable() {
    let counters = |body: &str| format!("protocol p\ncounter hits\nbuffer one bytes 64\nrole w[2] {{\n{body}\n}}\n");
    let m = rejects(&counters("  atomic_add(one, 1)"), "E023", 5, 14);
    assert!(m.contains("`one` is a buffer") && m.contains("counter NAME"), "{m}");
    rejects(&counters("  read_counter(one, expect = 0)"), "E023", 5, 16);
    let m = rejects(&counters("  read(hits, expect = 0)"), "E023", 5, 8);
    assert!(m.contains("`read_counter`"), "{m}");
    rejects(&counters("  write(hits, 1)"), "E023", 5, 9);
    rejects(&counters("  atomic_add(hits[0], 1)"), "E024", 5, 19);
    rejects(&counters("  atomic_add(hit, 1)"), "E021", 5, 14);
    rejects(&counters("  let x = hits + 1"), "E032", 5, 11);
}

/// A counter statement that names a peer (`cta = R`) needs a cluster; `read`/`write` keep
/// accepting `cta = 0` without one, as before counters existed.
#[test]
fn e041_counter_of_a_peer_without_a_cluster() {
    let one = |body: &str| format!("protocol p\ncounter hits\nbuffer one bytes 64\nrole w[2] {{\n{body}\n}}\n");
    let m = rejects(&one("  atomic_add(hits, 1, cta = 0)"), "E041", 5, 3);
    assert!(m.contains("cluster N"), "{m}");
    rejects(&one("  read_counter(hits, cta = 1, expect = 0)"), "E041", 5, 3);
    let plain = one("  read(one, cta = 0)");
    check(&parse(&plain).expect("parses")).expect("read with cta = 0 and no cluster stays accepted");
    let clustered = "protocol p\ncluster 2\ncounter hits\nrole w[1] {\n  atomic_add(hits, 1, cta = 1 - cta)\n}\n";
    check(&parse(clustered).expect("parses")).expect("a cluster spec may name a peer's counter");
}

/// Lowering a program that skipped `check` still refuses a place that indexes a single object or
/// names a whole array, with the advice that fits each case (E109).
#[test]
fn e109_lowering_names_the_array_or_scalar_mistake() {
    let lower = |body: &str| {
        let src = in_role(body);
        let p = parse(&src).unwrap_or_else(|d| panic!("{d:?}"));
        match phasecheck_model::program::lower::lower(&p, &[]) {
            Err(d) => d,
            Ok(_) => panic!("lowered:\n{src}"),
        }
    };
    let d = lower("  read(slot)");
    assert_eq!(d.code, "E109");
    assert!(
        d.message.contains("is an array of 2 buffers") && d.message.contains("`slot[0]`"),
        "{}",
        d.message
    );
    let d = lower("  arrive(done[0])");
    assert_eq!(d.code, "E109");
    assert!(d.message.contains("is a single barrier, not an array"), "{}", d.message);
}

/// The model follows at most 512 threads, counted over the cluster: 512 lower, 513 are refused
/// with E104 at the protocol's name, saying how many it has; a cluster of 2 CTAs of 256 lowers,
/// one of 2 CTAs of 257 does not.
#[test]
fn e104_at_most_512_threads_counted_over_the_cluster() {
    let lower = |src: &str| {
        let p = parse(src).unwrap_or_else(|d| panic!("{d:?}"));
        check(&p).unwrap_or_else(|d| panic!("{d:?}"));
        phasecheck_model::program::lower::lower(&p, &[])
    };
    let src = |cluster: u32, n: u32| format!("protocol big\ncluster {cluster}\nrole a[255] {{\n  work\n}}\nrole b[{n}] {{\n  work\n}}\n");
    for (cluster, n, total) in [(1, 257, 512), (2, 1, 512)] {
        let p = lower(&src(cluster, n)).unwrap_or_else(|d| panic!("{d:?}"));
        assert_eq!(p.threads.len(), total);
    }
    for (cluster, n, total) in [(1, 258, 513), (2, 2, 514)] {
        let d = lower(&src(cluster, n)).err().expect("too many threads lowered");
        assert_eq!(d.code, "E104");
        assert_eq!(d.position(&src(cluster, n)), (1, 10));
        assert!(d.message.contains(&format!("has {total} threads")), "{}", d.message);
    }
}

/// E040 follows a token through a loop: a loop that only ever re-arrives on the same barrier
/// leaves the token known (its wait on another barrier is rejected), but a `break` can leave the
/// loop between two assignments, so past a loop with a `break` the token is not known (no
/// rejection of a wait that the break makes right).
#[test]
fn e040_through_loops_with_and_without_break() {
    let ok = in_role("  let t = arrive(full[0])\n  for i in 0..2 {\n    t = arrive(done)\n    if i == 0 { break }\n    t = arrive(full[0])\n  }\n  wait(done, t)");
    let p = parse(&ok).expect("parses");
    let d = phasecheck_model::lang::check_all(&p);
    assert!(d.is_empty(), "{d:?}");
    let m = rejects(
        &in_role("  let t = arrive(done)\n  for i in 0..2 {\n    t = arrive(done)\n  }\n  wait(full[0], t)"),
        "E040",
        13,
        17,
    );
    assert!(m.contains("`done`"), "{m}");
}

/// E112 gives the advice that fits the value a uniform role misuses: an `elect()` result used
/// other than as the condition of an `if` with no `else` is told where it may go; a value of the
/// lane (`tid`) is told to come from `warp` instead.
#[test]
fn e112_advice_fits_an_elect_result_or_a_lane_value() {
    use phasecheck_model::program::lower::lower;
    let reject = |body: &str| {
        let src = format!("protocol p\nwarp_size 4\nbarrier b count 1\nrole w warps 1 uniform {{\n{body}\n}}\n");
        let ast = parse(&src).unwrap();
        check(&ast).unwrap_or_else(|d| panic!("{}", d.render("t.phase", &src)));
        let d = lower(&ast, &[]).expect_err("lowered");
        assert_eq!(d.code, "E112", "{}", d.render("t.phase", &src));
        d.message
    };
    let m = reject("  let e = elect()\n  let k = e * 2\n  if k == 2 { arrive(b) }");
    assert!(
        m.contains("depends on `elect()`") && m.contains("may only be the condition of an `if` with no `else`"),
        "{m}"
    );
    assert!(!m.contains("derive it from `warp`"), "{m}");
    let m = reject("  if tid == 0 { arrive(b) }");
    assert!(m.contains("derive it from `warp` instead"), "{m}");
    assert!(!m.contains("may only be the condition"), "{m}");
}

/// A loop's end is where `break` stops being allowed: a `break` after a `while` or a `for` loop,
/// outside any loop, is E035 at the `break`, like one in a body with no loop at all.
#[test]
fn e035_break_after_a_loop_has_ended() {
    let m = rejects(&in_role("  while ctrl == 1 {\n    work\n  }\n  break"), "E035", 12, 3);
    assert!(m.contains("innermost `for` or `while` loop"), "{m}");
    rejects(&in_role("  for i in 0..2 {\n    work\n  }\n  break"), "E035", 12, 3);
    rejects(&in_role("  break"), "E035", 9, 3);
}

/// `from = SRC` and `tensormap = MAP` are named arguments like the others: a positional argument
/// after either alone is refused (E007 at it, with the usage), not taken as the next slot.
#[test]
fn e007_a_positional_argument_after_from_or_tensormap_alone() {
    let m = rejects(&in_role("  copy_async(one, from = slot[0], done)"), "E007", 9, 35);
    assert!(m.contains("positional arguments must come before named ones"), "{m}");
    let m = rejects(&in_role("  copy_async(one, tensormap = desc, done)"), "E007", 9, 37);
    assert!(m.contains("positional arguments must come before named ones"), "{m}");
}
