//! Spec text never steers the generated CUDA: hostile bytes in a spec's comments (CR, line
//! continuations, trigraphs, `*/`, control and non-ASCII characters, preprocessor directives)
//! leave the kernel's token stream, after the C preprocessor (`cpp -P`, gcc's, with trigraphs on),
//! exactly as the same spec without them produces. Identifiers in the kernel come from the lowered
//! program (the language only has `[A-Za-z_][A-Za-z0-9_]*` names), so comments are the only spec
//! text that reaches the source verbatim-or-escaped.

use phasecheck_gpu::codegen::{comment_text, generate, Backend};
use phasecheck_model::{lang, program::lower::lower};
use proptest::prelude::*;
use std::io::Write;
use std::process::{Command, Stdio};

/// The kernel body, or None when the backend cannot express the spec.
fn kernel_body(source: &str, backend: Backend) -> Option<String> {
    let ast = lang::parse(source).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    lang::check(&ast).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    let proto = lower(&ast, &[]).unwrap_or_else(|d| panic!("{}", d.render("spec", source)));
    generate(&proto, source, backend, 0).ok().map(|k| k.body)
}

/// The tokens of CUDA source after `cpp -P -trigraphs` (comments gone, lines spliced, directives
/// run), separated by whitespace.
fn preprocessed_tokens(cuda: &str) -> Vec<String> {
    let mut child = Command::new("cpp")
        .args(["-P", "-w", "-trigraphs", "-x", "c++", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`cpp` (the C preprocessor, Debian package cpp) must be installed for this test");
    child.stdin.take().unwrap().write_all(cuda.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "cpp failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

const SPECS: &[&str] = &[
    include_str!("../../specs/guide/double_buffer.phase"),
    include_str!("../../specs/guide/completion_rotate.phase"),
    include_str!("../../specs/guide/tx_copy_async.phase"),
    include_str!("../../specs/guide/try_wait_parity_polling.phase"),
];

/// `spec` with `extra[i]` placed at the end of line i as a comment (`//` when `line`, else
/// `/* */`). Lines inside a block comment are left alone.
fn inject(spec: &str, extra: &[(bool, String)]) -> String {
    let mut out = String::new();
    let mut in_block = false;
    for (i, l) in spec.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(l);
        // Track block comments the line leaves open (the library's are simple).
        if let Some(o) = l.rfind("/*") {
            in_block = !l[o..].contains("*/");
        } else if l.contains("*/") {
            in_block = false;
        }
        if in_block {
            continue;
        }
        if let Some((line, text)) = extra.get(i) {
            // After a `//` on the line a newline would end that comment: keep the text on the line.
            if *line || l.contains("//") {
                out.push_str(" //");
                out.push_str(&text.replace('\n', " "));
            } else {
                out.push_str(" /*");
                out.push_str(&text.replace("*/", "* /"));
                out.push_str("*/");
            }
        }
    }
    out
}

fn assert_same_tokens(clean: &str, dirty: &str) {
    for b in [Backend::Libcu, Backend::Ptx] {
        let (c, d) = match (kernel_body(clean, b), kernel_body(dirty, b)) {
            (Some(c), Some(d)) => (c, d),
            (None, None) => continue,
            (c, d) => panic!("backend {}: expressible {} clean, {} dirty", b.name(), c.is_some(), d.is_some()),
        };
        let (tc, td) = (preprocessed_tokens(&c), preprocessed_tokens(&d));
        if tc != td {
            let at = tc.iter().zip(&td).position(|(x, y)| x != y).unwrap_or(tc.len().min(td.len()));
            panic!(
                "backend {}: token streams differ at token {at}: clean {:?} vs dirty {:?}\n--- dirty kernel ---\n{d}",
                b.name(),
                tc.get(at.saturating_sub(3)..(at + 5).min(tc.len())),
                td.get(at.saturating_sub(3)..(at + 5).min(td.len()))
            );
        }
    }
}

/// The injections once found in generated comments, by hand: a lone CR followed by code, a
/// comment ending in `\` (which would swallow the index check after it), the trigraph `??/`,
/// `*/`, and directives.
#[test]
fn known_injections_do_not_reach_the_token_stream() {
    let clean = SPECS[0];
    let hostile = [
        "\r}  int evil = 1; //",
        "\rs.buf_slot[99] = 1;",
        "ends in a backslash \\",
        "ends in a trigraph ??/",
        "closes */ a comment /* and opens one",
        "\r#define if while",
        "\u{b}\u{c}\u{85}\u{2028}\u{2029}\u{1b}[31m red",
        "\0 nul \u{7f} del",
    ];
    for h in hostile {
        let extra: Vec<(bool, String)> = clean.lines().map(|_| (true, h.to_string())).collect();
        assert_same_tokens(clean, &inject(clean, &extra));
        let extra: Vec<(bool, String)> = clean.lines().map(|_| (false, h.to_string())).collect();
        assert_same_tokens(clean, &inject(clean, &extra));
    }
}

#[test]
fn comment_text_is_inert() {
    for s in ["a\\", "??/", "*/", "/*", "x\ry", "\u{2028}", "é", "???", "*//*"] {
        let c = comment_text(s);
        assert!(c.bytes().all(|b| (b' '..=b'~').contains(&b)), "{s:?} -> {c:?}");
        assert!(
            !c.contains('\\') && !c.contains("??") && !c.contains("*/") && !c.contains("/*"),
            "{s:?} -> {c:?}"
        );
    }
    assert_eq!(comment_text("wait(b, 0)  // ok?"), "wait(b, 0)  // ok?");
    assert_eq!(comment_text(&"x".repeat(500)).len(), 123);
}

fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![
            '\r', '\\', '?', '/', '*', '#', '"', '\'', '\n', '\t', '\u{0}', '\u{b}', '\u{c}', '\u{1b}', '\u{7f}', '\u{85}',
            '\u{2028}', '\u{2029}', '\u{feff}', '}', '{', ';', 'a', ' ', 'é', '字',
        ]),
        1 => any::<char>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_comment_text_leaves_the_preprocessed_kernel_unchanged(
        which in 0..SPECS.len(),
        extra in prop::collection::vec((any::<bool>(), prop::collection::vec(hostile_char(), 0..24).prop_map(|v| v.into_iter().collect::<String>())), 0..80),
    ) {
        let clean = SPECS[which];
        assert_same_tokens(clean, &inject(clean, &extra));
    }
}
