//! The whole pipeline as a fuzzer drives it (docs/fuzzing.md): bytes -> parse -> check -> pretty
//! (and parse back) -> lower -> bounded search (both step granularities) -> replay of every trace
//! found -> CUDA for both backends. Bad input must come back as a diagnostic, never a panic, and the
//! generated CUDA must carry no spec text that could steer it.
//!
//! Also a small seeded mutator (no dependencies) for the stable fuzz loop (`examples/fuzz.rs`) and
//! the proptest fuzz that CI runs (`tests/fuzz_pipeline.rs`).

use crate::codegen::{generate, Backend};
use phasecheck_model::lang::{self, parser};
use phasecheck_model::program::lower::lower;
use phasecheck_model::rt::Model;
use phasecheck_verifier::{check, trace, CheckOptions};

/// How far one input went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reached {
    NotUtf8,
    ParseError,
    CheckError,
    LowerError,
    Searched,
}

/// States per bounded search: enough to exercise the semantics, few enough for 10^6 inputs.
const FUZZ_STATES: usize = 64;
/// Searched only when threads x (threads + barriers + buffers + vars) is at most this.
const FUZZ_CELLS: usize = 4096;
/// The default (merged local steps) model runs local statements to completion inside one step,
/// which a mutated `for i in 0..99999999` makes arbitrarily long: it is searched only when every
/// integer literal is at most this (the fine-grained model, whose every step is bounded, always).
const FUZZ_LITERAL: i64 = 16;

/// Run the pipeline on one input; panics only on a defect (that is what the fuzzer looks for).
pub fn pipeline(bytes: &[u8]) -> Reached {
    let Ok(src) = std::str::from_utf8(bytes) else {
        return Reached::NotUtf8;
    };
    let ast = match lang::parse(src) {
        Ok(a) => a,
        Err(d) => {
            let _ = d.render("fuzz.phase", src);
            return Reached::ParseError;
        }
    };
    if let Err(d) = lang::check(&ast) {
        let _ = d.render("fuzz.phase", src);
        return Reached::CheckError;
    }
    let printed = lang::pretty(&ast);
    if let Err(d) = lang::parse(&printed) {
        panic!("fmt output does not parse: {}\n{printed}", d.render("fmt", &printed));
    }
    let proto = match lower(&ast, &[]) {
        Ok(p) => p,
        Err(d) => {
            let _ = d.render("fuzz.phase", src);
            return Reached::LowerError;
        }
    };
    let opts = CheckOptions {
        max_states: Some(FUZZ_STATES),
        ..CheckOptions::default()
    };
    // A state holds a vector clock per thread, barrier and buffer: a protocol of 512 threads
    // and 65,536 barriers has states of hundreds of MiB (the CLI's memory bound handles those,
    // tests/hostile.rs); the fuzzer searches the small ones and generates CUDA for all.
    let cells = proto.threads.len() * (proto.threads.len() + proto.barriers.len() + proto.buffers.len() + proto.vars.len());
    let mut models = Vec::new();
    if cells <= FUZZ_CELLS {
        models.push(Model::fine_grained(proto.clone()));
        if small_literals(src) {
            models.push(Model::new(proto.clone()));
        }
    }
    for model in &models {
        let r = check(model, &opts);
        for v in &r.violations {
            // A trace the search found replays (the replay may stop early at the violation).
            let _ = trace::replay(model, &v.actions);
        }
    }
    for b in [Backend::Libcu, Backend::Ptx] {
        if let Ok(k) = generate(&proto, src, b, 0) {
            assert_inert(&k.body);
        }
    }
    Reached::Searched
}

/// Generated CUDA holds no character that spec text could have smuggled in: printable ASCII and
/// newlines only, no line continuation, no trigraph.
pub fn assert_inert(cuda: &str) {
    for (n, line) in cuda.split('\n').enumerate() {
        assert!(
            line.bytes().all(|b| (b' '..=b'~').contains(&b)),
            "line {} of the generated CUDA has a control or non-ASCII character: {line:?}",
            n + 1
        );
        assert!(!line.ends_with('\\'), "line {} ends in a line continuation: {line:?}", n + 1);
        assert!(!line.contains("??"), "line {} has a trigraph-like `??`: {line:?}", n + 1);
    }
}

fn small_literals(src: &str) -> bool {
    match lang::lexer::lex(src) {
        Ok(toks) => toks.iter().all(|t| match t.tok {
            lang::lexer::Tok::Int(v) => v.abs() <= FUZZ_LITERAL,
            _ => true,
        }),
        Err(_) => false,
    }
}

/// Words and fragments the mutator splices in: the language's keywords and operations, its
/// punctuation, and text known to be hostile (CR, line continuations, trigraphs, escapes, BOM).
pub fn dictionary() -> Vec<String> {
    let mut d: Vec<String> = parser::KEYWORDS.iter().chain(parser::OPS).map(|s| s.to_string()).collect();
    for s in [
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ";",
        "\n",
        ".",
        "..",
        "=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "!",
        "//",
        "/*",
        "*/",
        "\r",
        "\\",
        "??/",
        "\t",
        "\u{1b}[31m",
        "\u{feff}",
        "\u{2028}",
        "0x",
        "_",
        "0",
        "1",
        "2",
        "3",
        "4",
        "16",
        "255",
        "65535",
        "65536",
        "2147483648",
        "9223372036854775807",
        "-9223372036854775808",
        "0xffffffffffffffff",
        "tid",
        "gtid",
        "lane",
        "warp",
        ".count",
        "expect = ",
        "version = ",
        "bytes = ",
        "count ",
        "completion ",
        "manual_init",
        "[1024]",
        " else if ",
        " else { ",
        "if tid == 0 { ",
        "for i in 0..4 { ",
    ] {
        d.push(s.to_string());
    }
    d
}

/// xorshift64*: a small, seedable generator (mutation needs no statistical quality).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Apply 1..=`max_edits` random edits to `input`: delete, duplicate or move a range, insert a
/// dictionary word or random bytes, flip a byte, change a number, splice from another seed.
pub fn mutate(input: &[u8], rng: &mut Rng, dict: &[String], seeds: &[Vec<u8>], max_edits: usize) -> Vec<u8> {
    let mut v = input.to_vec();
    let edits = 1 + rng.below(max_edits.max(1));
    for _ in 0..edits {
        let len = v.len();
        let at = rng.below(len + 1);
        match rng.below(9) {
            0 if len > 0 => {
                let n = 1 + rng.below(16.min(len - at.min(len - 1)));
                let at = at.min(len - 1);
                v.drain(at..(at + n).min(len));
            }
            1 if len > 0 => {
                let at = at.min(len - 1);
                let n = 1 + rng.below(64.min(len - at));
                let piece: Vec<u8> = v[at..at + n].to_vec();
                let to = rng.below(v.len() + 1);
                v.splice(to..to, piece);
            }
            2 | 3 => {
                let w = &dict[rng.below(dict.len())];
                v.splice(at..at, w.bytes());
            }
            4 if len > 0 => {
                let at = at.min(len - 1);
                v[at] ^= 1 << rng.below(8);
            }
            5 => {
                let n = 1 + rng.below(4);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at..at, bytes);
            }
            6 => {
                // Replace the next number with an interesting one.
                if let Some(s) = v[at.min(len)..].iter().position(|b| b.is_ascii_digit()) {
                    let s = at + s;
                    let e = s + v[s..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count();
                    let nums = [
                        "0",
                        "1",
                        "2",
                        "3",
                        "7",
                        "31",
                        "32",
                        "33",
                        "1023",
                        "1024",
                        "65536",
                        "4294967296",
                        "99999999999",
                    ];
                    let n = nums[rng.below(nums.len())];
                    v.splice(s..e, n.bytes());
                }
            }
            7 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let s = rng.below(other.len());
                    let n = 1 + rng.below(128.min(other.len() - s));
                    v.splice(at..at, other[s..s + n].iter().copied());
                }
            }
            _ => {
                // Duplicate a whole line (a statement, a declaration).
                let lines: Vec<usize> = std::iter::once(0)
                    .chain(v.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i + 1))
                    .collect();
                let l = lines[rng.below(lines.len())];
                let e = v[l..].iter().position(|b| *b == b'\n').map(|p| l + p + 1).unwrap_or(v.len());
                let line = v[l..e].to_vec();
                let to = lines[rng.below(lines.len())];
                v.splice(to..to, line);
            }
        }
        if v.len() > 64 * 1024 {
            v.truncate(64 * 1024);
        }
    }
    v
}

/// The seed corpus: every spec below `dirs` (library, malformed tests, fixtures).
pub fn seeds(dirs: &[std::path::PathBuf]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for d in dirs {
        let mut stack = vec![d.clone()];
        while let Some(p) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&p) else { continue };
            for e in rd.flatten() {
                let Ok(ty) = e.file_type() else { continue };
                if ty.is_dir() {
                    stack.push(e.path());
                } else if e.path().extension().is_some_and(|x| x == "phase") {
                    if let Ok(b) = std::fs::read(e.path()) {
                        out.push(b);
                    }
                }
            }
        }
    }
    out.sort();
    out
}
