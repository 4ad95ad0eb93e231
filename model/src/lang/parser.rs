//! Recursive-descent parser for LANGUAGE.md. Stops at the first error.
//!
//! Words are not split into keywords by the lexer: the parser decides what a word means where it
//! stands, so `count`, `bytes`, `expect` and `version` can be attribute and argument names
//! (`barrier b count 1`, `read(slot, expect = i)`, `consumer.count`) while still being reserved as
//! variable names.

use super::ast::*;
use super::check::closest;
use super::diag::Diagnostic;
use super::lexer::{lex, Tok, Token};
use crate::kind::ViolationKind;

/// The operation keywords: a word followed by `(` that is one of these is an operation.
pub const OPS: &[&str] = &[
    "arrive",
    "arrive_expect_tx",
    "wait",
    "wait_parity",
    "try_wait",
    "try_wait_parity",
    "arrive_and_wait",
    "arrive_and_drop",
    "expect_tx",
    "complete_tx",
    "copy_async",
    "memcpy_async",
    "read",
    "write",
    "init",
    "inval",
    "commit",
    "elect",
    // Named barriers, cp.async with an mbarrier arrive-on
    "bar_sync",
    "bar_arrive",
    "cp_async",
    "cp_async_arrive",
    "cp_async_arrive_noinc",
    // The async proxy.
    "copy_store_async",
    "commit_group",
    "wait_group",
    "wait_group_read",
    "wgmma_async",
    "wgmma_wait",
    "fence_proxy_async",
    "fence_mbarrier_init",
    // Cluster scope.
    "cluster_arrive",
    "cluster_wait",
    "cluster_sync",
];

/// Words that cannot name a param, var, barrier, buffer, role, completion or local.
pub const KEYWORDS: &[&str] = &[
    "protocol",
    "expect",
    "param",
    "warp_size",
    "cluster",
    "barrier",
    "buffer",
    "var",
    "completion",
    "role",
    "let",
    "for",
    "in",
    "if",
    "else",
    "assert",
    "return",
    "work",
    "syncwarp",
    "syncthreads",
    "count",
    "bytes",
    "manual_init",
    "while",
    "break",
    "fn",
];

/// Whether `word` is reserved (a keyword or an operation name).
pub fn is_reserved(word: &str) -> bool {
    KEYWORDS.contains(&word) || OPS.contains(&word)
}

/// Nesting limit for blocks and expressions, so that hostile input cannot overflow the stack of
/// anything that walks the tree (check, lower, pretty, the model, codegen). An expression counts
/// its operator tree: `a + b + c` is two levels, so a flat chain of 24,000 `+` is refused too.
const MAX_DEPTH: usize = 200;
/// Arms of one `else if` chain: a flat chain is not nesting, but the tree holds it nested.
pub const MAX_ELSE_IF: usize = 500;

/// Parses a whole `.phase` file. The first error is returned.
pub fn parse(source: &str) -> Result<Program, Diagnostic> {
    parse_all(source).map_err(|mut v| v.remove(0))
}

/// At most this many syntax errors are reported from one file.
pub const MAX_SYNTAX_ERRORS: usize = 20;

/// Like `parse`, but a syntax error inside a body does not end the parse: it is recorded, the
/// rest of that statement is skipped (to the next newline or `;` outside brackets and braces),
/// and parsing resumes with the next statement, so that every such error of a file is reported
/// at once (up to `MAX_SYNTAX_ERRORS`, in source order). An error in the header or between
/// declarations still ends the parse.
pub fn parse_all(source: &str) -> Result<Program, Vec<Diagnostic>> {
    let toks = lex(source).map_err(|d| vec![d])?;
    // Inline functions may be called before they are declared: their names are known up front,
    // so that `advance(s, p)` is a call and a misspelt operation is still reported as one.
    let fns = toks
        .windows(2)
        .filter_map(|w| match (&w[0].tok, &w[1].tok) {
            (Tok::Ident(k), Tok::Ident(n)) if k == "fn" => Some(n.clone()),
            _ => None,
        })
        .collect();
    let mut p = Parser {
        fns,
        toks,
        pos: 0,
        depth: 0,
        tree_depth: 0,
        errors: Vec::new(),
    };
    let r = p.program();
    let mut errors = std::mem::take(&mut p.errors);
    match r {
        Ok(prog) if errors.is_empty() => Ok(prog),
        Ok(_) => Err(errors),
        Err(d) => {
            errors.push(d);
            errors.truncate(MAX_SYNTAX_ERRORS);
            Err(errors)
        }
    }
}

type PResult<T> = Result<T, Diagnostic>;

struct Parser {
    /// Names declared with `fn NAME`.
    fns: Vec<String>,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Statement errors recovered from (see `parse_all`).
    errors: Vec<Diagnostic>,
    /// Operator depth of the expression just parsed (see `binary`).
    tree_depth: usize,
}

fn err(code: &'static str, span: Span, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code, span, msg)
}

fn binop(t: &Tok) -> Option<BinOp> {
    Some(match t {
        Tok::Plus => BinOp::Add,
        Tok::Minus => BinOp::Sub,
        Tok::Star => BinOp::Mul,
        Tok::Slash => BinOp::Div,
        Tok::Percent => BinOp::Rem,
        Tok::EqEq => BinOp::Eq,
        Tok::Ne => BinOp::Ne,
        Tok::Lt => BinOp::Lt,
        Tok::Le => BinOp::Le,
        Tok::Gt => BinOp::Gt,
        Tok::Ge => BinOp::Ge,
        Tok::AndAnd => BinOp::And,
        Tok::OrOr => BinOp::Or,
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Slot {
    Place,
    Expr,
}

/// Shape of an operation's argument list.
struct Sig {
    positional: &'static [Slot],
    required: usize,
    named: &'static [&'static str],
    usage: &'static str,
}

fn signature(op: &str) -> Sig {
    use Slot::*;
    let (positional, required, named, usage): (&'static [Slot], usize, &'static [&'static str], _) = match op {
        "arrive" => (
            &[Place, Expr],
            1,
            &["cta"],
            "`arrive(B)` or `arrive(B, n)`, optionally with `cta = R` (a remote arrive on CTA R's B)",
        ),
        "arrive_expect_tx" => (
            &[Place, Expr],
            2,
            &["cta"],
            "`arrive_expect_tx(B, BYTES)`, optionally with `cta = R` (on CTA R's B)",
        ),
        "wait" => (&[Place, Expr], 2, &[], "`wait(B, token)`"),
        "wait_parity" => (&[Place, Expr], 2, &[], "`wait_parity(B, parity)`"),
        "try_wait" => (&[Place, Expr], 2, &[], "`try_wait(B, token)`"),
        "try_wait_parity" => (&[Place, Expr], 2, &[], "`try_wait_parity(B, parity)`"),
        "arrive_and_wait" => (&[Place], 1, &[], "`arrive_and_wait(B)`"),
        "arrive_and_drop" => (&[Place], 1, &[], "`arrive_and_drop(B)`"),
        "expect_tx" => (&[Place, Expr], 2, &[], "`expect_tx(B, BYTES)`"),
        "complete_tx" => (&[Place, Expr], 2, &[], "`complete_tx(B, BYTES)`"),
        "copy_async" => (
            &[Place, Place],
            2,
            &["bytes", "version", "offset", "multicast"],
            "`copy_async(BUF, B)`, optionally followed by `bytes = N`, `version = V`, `offset = O` and `multicast = MASK`",
        ),
        "memcpy_async" => (
            &[Place, Place],
            2,
            &["bytes", "version", "offset"],
            "`memcpy_async(BUF, B)`, optionally followed by `bytes = N`, `version = V` and `offset = O`",
        ),
        "read" => (
            &[Place],
            1,
            &["expect", "offset", "bytes", "cta"],
            "`read(BUF)` or `read(BUF, expect = V)`, optionally with `offset = O`, `bytes = N` and `cta = R`",
        ),
        "write" => (
            &[Place, Expr],
            2,
            &["cta"],
            "`write(BUF, V)`, optionally with `cta = R` (a DSMEM write into CTA R's BUF)",
        ),
        "init" => (&[Place, Expr], 1, &[], "`init(B)` or `init(B, COUNT)`"),
        "inval" => (&[Place], 1, &[], "`inval(B)`"),
        "commit" => (&[Place], 1, &[], "`commit(B)`"),
        "elect" => (&[], 0, &[], "`elect()`"),
        "bar_sync" => (&[Expr, Expr], 2, &[], "`bar_sync(ID, COUNT)`"),
        "bar_arrive" => (&[Expr, Expr], 2, &[], "`bar_arrive(ID, COUNT)`"),
        "cp_async" => (
            &[Place],
            1,
            &["offset", "bytes", "version"],
            "`cp_async(BUF)`, optionally followed by `offset = O`, `bytes = N` and `version = V`",
        ),
        "cp_async_arrive" => (&[Place], 1, &[], "`cp_async_arrive(B)`"),
        "cp_async_arrive_noinc" => (&[Place], 1, &[], "`cp_async_arrive_noinc(B)`"),
        // The async proxy.
        "copy_store_async" => (&[Place], 1, &[], "`copy_store_async(BUF)`"),
        "commit_group" => (&[], 0, &[], "`commit_group()`"),
        "wait_group" => (&[Expr], 1, &[], "`wait_group(N)`"),
        "wait_group_read" => (&[Expr], 1, &[], "`wait_group_read(N)`"),
        "wgmma_async" => (
            &[Place, Place, Place, Place],
            1,
            &[],
            "`wgmma_async(A)` or `wgmma_async(A, B)` (one to four operand buffers)",
        ),
        "wgmma_wait" => (&[Expr], 1, &[], "`wgmma_wait(N)`"),
        "fence_proxy_async" => (&[], 0, &[], "`fence_proxy_async()`"),
        "fence_mbarrier_init" => (&[], 0, &[], "`fence_mbarrier_init()`"),
        "cluster_arrive" => (&[], 0, &[], "`cluster_arrive()`"),
        "cluster_wait" => (&[], 0, &[], "`cluster_wait()`"),
        "cluster_sync" => (&[], 0, &[], "`cluster_sync()`"),
        _ => unreachable!("signature of a non-operation"),
    };
    Sig {
        positional,
        required,
        named,
        usage,
    }
}

enum Arg {
    Place(Place),
    Expr(Expr),
}

impl Parser {
    // ----- token helpers -----

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        let i = (self.pos + ahead).min(self.toks.len() - 1);
        &self.toks[i].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    /// End of the previous token (for spans of constructs that just ended).
    fn prev_end(&self) -> u32 {
        if self.pos == 0 {
            0
        } else {
            self.toks[self.pos - 1].span.end
        }
    }

    fn since(&self, start: Span) -> Span {
        Span {
            start: start.start,
            end: self.prev_end().max(start.start),
        }
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s == w)
    }

    fn is_term(&self) -> bool {
        matches!(self.peek(), Tok::Newline | Tok::Semi)
    }

    fn skip_terms(&mut self) {
        while self.is_term() {
            self.bump();
        }
    }

    fn expect_tok(&mut self, want: Tok, context: &str) -> PResult<Span> {
        if *self.peek() == want {
            Ok(self.bump().span)
        } else {
            Err(err(
                "E005",
                self.span(),
                format!("expected `{}` {context}, but found {}", want.text(), self.peek().describe()),
            ))
        }
    }

    fn expect_word(&mut self, w: &str, context: &str) -> PResult<Span> {
        if self.is_word(w) {
            Ok(self.bump().span)
        } else {
            Err(err(
                "E005",
                self.span(),
                format!("expected `{w}` {context}, but found {}", self.peek().describe()),
            ))
        }
    }

    /// A name being declared or referred to; reserved words are refused.
    fn name(&mut self, what: &str) -> PResult<Ident> {
        match self.peek().clone() {
            Tok::Ident(s) => {
                if is_reserved(&s) {
                    return Err(reserved(&s, self.span(), what));
                }
                Ok(Ident {
                    name: s,
                    span: self.bump().span,
                })
            }
            other => Err(err("E005", self.span(), format!("expected {what}, but found {}", other.describe()))),
        }
    }

    fn enter(&mut self, at: Span) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(
                "E005",
                at,
                format!("this is nested more than {MAX_DEPTH} levels deep; split it into smaller pieces"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Error recovery: from the start of a failed statement (token `from`), skip to the next
    /// newline or `;` outside brackets and braces, or to the `}` that closes the current block.
    /// The block loop never starts a statement at a newline, `;`, `}` or the end, so the token at
    /// `from` is passed over and recovery always makes progress.
    fn skip_statement(&mut self, from: usize) {
        self.pos = self.pos.max(from);
        let mut braces = 0usize;
        loop {
            match self.peek() {
                Tok::Eof => return,
                Tok::Newline | Tok::Semi if braces == 0 && self.pos > from => return,
                Tok::LBrace => braces += 1,
                Tok::RBrace if braces == 0 => return,
                Tok::RBrace => braces -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    /// After a statement or declaration: a newline, `;`, or (in a block) `}` must follow.
    fn end_of_statement(&mut self, in_block: bool) -> PResult<()> {
        match self.peek() {
            Tok::Newline | Tok::Semi | Tok::Eof => Ok(()),
            Tok::RBrace if in_block => Ok(()),
            other => Err(err(
                "E005",
                self.span(),
                format!(
                    "expected the end of the {} (a newline or `;`), but found {}",
                    if in_block { "statement" } else { "declaration" },
                    other.describe()
                ),
            )),
        }
    }

    // ----- items -----

    fn program(&mut self) -> PResult<Program> {
        self.skip_terms();
        if !self.is_word("protocol") {
            return Err(err(
                "E004",
                self.span(),
                format!(
                    "a spec must begin with its header `protocol NAME`, but found {}",
                    self.peek().describe()
                ),
            ));
        }
        self.bump();
        // The protocol's name is never referred to, so any word will do (`protocol arrive_and_wait`).
        let name = match self.peek().clone() {
            Tok::Ident(s) => Ident {
                name: s,
                span: self.bump().span,
            },
            other => {
                return Err(err(
                    "E005",
                    self.span(),
                    format!("expected the protocol's name after `protocol`, but found {}", other.describe()),
                ))
            }
        };
        self.end_of_statement(false)?;
        let mut expect: Option<Expect> = None;
        let mut items = Vec::new();
        let mut warp_size_seen = false;
        loop {
            self.skip_terms();
            let at = self.span();
            let word = match self.peek() {
                Tok::Eof => break,
                Tok::Ident(s) => s.clone(),
                other => {
                    return Err(err(
                        "E005",
                        at,
                        format!(
                            "expected a declaration (`param`, `barrier`, `buffer`, `var`, `completion` or `role`), but found {}",
                            other.describe()
                        ),
                    ))
                }
            };
            match word.as_str() {
                "protocol" => {
                    return Err(err(
                        "E011",
                        at,
                        "a spec has exactly one `protocol` header; remove this one or move it to a file of its own",
                    ))
                }
                "expect" => {
                    let e = self.expect_line()?;
                    if expect.is_some() {
                        return Err(err(
                            "E011",
                            at,
                            "`expect` is given twice; list every kind on one line, like `expect deadlock, stale-wait`",
                        ));
                    }
                    expect = Some(e);
                }
                "param" => {
                    self.bump();
                    let name = self.name("a param name")?;
                    self.expect_tok(Tok::Assign, "after the param name, as in `param STAGES = 2`")?;
                    let value = self.expr()?;
                    items.push(Item::Param(ParamDecl { name, value }));
                }
                "warp_size" => {
                    self.bump();
                    let e = self.expr()?;
                    if warp_size_seen {
                        return Err(err("E011", at, "`warp_size` is given twice; keep only one"));
                    }
                    warp_size_seen = true;
                    items.push(Item::WarpSize(e));
                }
                "cluster" => {
                    self.bump();
                    let e = self.expr()?;
                    if items.iter().any(|i| matches!(i, Item::Cluster(_))) {
                        return Err(err("E011", at, "`cluster` is given twice; keep only one"));
                    }
                    items.push(Item::Cluster(e));
                }
                "barrier" => items.push(Item::Barrier(self.barrier()?)),
                "buffer" => items.push(Item::Buffer(self.buffer()?)),
                "var" => {
                    self.bump();
                    let name = self.name("a var name")?;
                    self.expect_tok(Tok::Assign, "after the var name, as in `var ctrl = 0`")?;
                    let init = self.expr()?;
                    items.push(Item::Var(VarDecl { name, init }));
                }
                "completion" => {
                    self.bump();
                    let name = self.name("a completion function name")?;
                    let body = self.block()?;
                    items.push(Item::Completion(CompletionDecl { name, body }));
                }
                "role" => items.push(Item::Role(self.role()?)),
                "fn" => items.push(Item::Function(self.function()?)),
                "let" | "for" | "if" | "assert" | "return" | "work" | "syncwarp" | "syncthreads" | "while" | "break" => {
                    return Err(err(
                        "E005",
                        at,
                        format!("`{word}` is a statement, and statements belong inside a `role` or `completion` body `{{ ... }}`"),
                    ))
                }
                w if OPS.contains(&w) => {
                    return Err(err(
                        "E005",
                        at,
                        format!("`{word}` is an operation, and operations belong inside a `role` or `completion` body `{{ ... }}`"),
                    ))
                }
                _ => {
                    let decls = [
                        "param",
                        "warp_size",
                        "cluster",
                        "barrier",
                        "buffer",
                        "var",
                        "completion",
                        "role",
                        "expect",
                    ];
                    let hint = match closest(&word, decls.iter().copied()) {
                        Some(d) => format!("; did you mean `{d}`?"),
                        None => " (`param`, `barrier`, `buffer`, `var`, `completion` or `role`)".to_string(),
                    };
                    return Err(err("E005", at, format!("expected a declaration, but found `{word}`{hint}")));
                }
            }
            self.end_of_statement(false)?;
        }
        Ok(Program { name, expect, items })
    }

    fn expect_line(&mut self) -> PResult<Expect> {
        self.bump();
        if self.is_word("holds") {
            let span = self.bump().span;
            return Ok(Expect::Holds(span));
        }
        let mut kinds = Vec::new();
        loop {
            let start = self.span();
            let mut name = match self.peek().clone() {
                Tok::Ident(s) => {
                    self.bump();
                    s
                }
                other => {
                    return Err(err(
                        "E006",
                        start,
                        format!(
                            "expected `holds` or a violation kind after `expect`, but found {}; the kinds are {}",
                            other.describe(),
                            kind_list()
                        ),
                    ))
                }
            };
            while *self.peek() == Tok::Minus {
                if let Tok::Ident(s) = self.peek_at(1).clone() {
                    self.bump();
                    self.bump();
                    name.push('-');
                    name.push_str(&s);
                } else {
                    break;
                }
            }
            let span = self.since(start);
            match ViolationKind::from_name(&name) {
                Some(k) => kinds.push((k, span)),
                None => {
                    let names = ViolationKind::ALL.iter().map(|k| k.name()).chain(["holds"]);
                    let msg = match closest(&name, names) {
                        Some(s) => format!("`{name}` is not a violation kind; did you mean `{s}`?"),
                        None => format!("`{name}` is not a violation kind; write `holds` or some of {}", kind_list()),
                    };
                    return Err(err("E006", span, msg));
                }
            }
            if *self.peek() == Tok::Comma {
                self.bump();
            } else {
                break;
            }
        }
        Ok(Expect::Kinds(kinds))
    }

    fn opt_len(&mut self) -> PResult<Option<Expr>> {
        if *self.peek() == Tok::LBracket {
            self.bump();
            let e = self.expr()?;
            self.expect_tok(Tok::RBracket, "to close the array length")?;
            Ok(Some(e))
        } else {
            Ok(None)
        }
    }

    fn barrier(&mut self) -> PResult<BarrierDecl> {
        let start = self.bump().span;
        let name = self.name("a barrier name")?;
        let len = self.opt_len()?;
        self.expect_word(
            "count",
            "and the expected arrival count after the barrier name, as in `barrier full count 1`",
        )?;
        let count = self.expr()?;
        let mut completion: Option<Ident> = None;
        let mut manual_init = false;
        while let Tok::Ident(w) = self.peek().clone() {
            let at = self.span();
            match w.as_str() {
                "completion" => {
                    self.bump();
                    let c = self.name("the completion function's name")?;
                    if completion.is_some() {
                        return Err(err(
                            "E011",
                            at,
                            "this barrier already names a completion function; keep only one `completion NAME`",
                        ));
                    }
                    completion = Some(c);
                }
                "manual_init" => {
                    self.bump();
                    if manual_init {
                        return Err(err("E011", at, "`manual_init` is given twice; keep only one"));
                    }
                    manual_init = true;
                }
                _ => {
                    let hint = match closest(&w, ["completion", "manual_init"]) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => "a barrier takes only `completion NAME` and `manual_init` after its count".to_string(),
                    };
                    return Err(err("E005", at, format!("`{w}` is not a barrier attribute; {hint}")));
                }
            }
        }
        let span = self.since(start);
        Ok(BarrierDecl {
            name,
            len,
            count,
            completion,
            manual_init,
            span,
        })
    }

    fn buffer(&mut self) -> PResult<BufferDecl> {
        let start = self.bump().span;
        let name = self.name("a buffer name")?;
        let len = self.opt_len()?;
        self.expect_word("bytes", "and the buffer's size after its name, as in `buffer slot bytes 256`")?;
        let bytes = self.expr()?;
        let span = self.since(start);
        Ok(BufferDecl { name, len, bytes, span })
    }

    fn role(&mut self) -> PResult<RoleDecl> {
        let start = self.bump().span;
        let name = self.name("a role name")?;
        let unit = if self.is_word("warps") {
            RoleUnit::Warps
        } else if self.is_word("warpgroups") {
            RoleUnit::Warpgroups
        } else {
            RoleUnit::Threads
        };
        let count = if unit != RoleUnit::Threads {
            self.bump();
            self.expr()?
        } else {
            if *self.peek() != Tok::LBracket {
                return Err(err(
                    "E005",
                    self.span(),
                    format!(
                        "a role needs its thread count in brackets, as in `role {}[1] {{ ... }}`, or whole warps, as in `role {} warps 1 {{ ... }}`, but found {}",
                        name.name,
                        name.name,
                        self.peek().describe()
                    ),
                ));
            }
            self.bump();
            let count = self.expr()?;
            self.expect_tok(Tok::RBracket, "to close the role's thread count")?;
            count
        };
        let uniform = self.is_word("uniform");
        if uniform {
            let at = self.bump().span;
            if unit == RoleUnit::Threads {
                return Err(err(
                    "E012",
                    at,
                    format!(
                        "only a role laid out by whole warps can be `uniform` (one agent per warp); write `role {} warps N uniform {{ ... }}` or `warpgroups N uniform`, or drop `uniform`",
                        name.name
                    ),
                ));
            }
        }
        let body = self.block()?;
        let span = self.since(start);
        Ok(RoleDecl {
            name,
            count,
            unit,
            uniform,
            body,
            span,
        })
    }

    /// `fn NAME(a, b) { ... }`
    fn function(&mut self) -> PResult<FnDecl> {
        let start = self.bump().span;
        let name = self.name("a function name")?;
        self.expect_tok(Tok::LParen, "after the function name, as in `fn advance(s, p) { ... }`")?;
        let mut params = Vec::new();
        while *self.peek() != Tok::RParen {
            params.push(self.name("a parameter name")?);
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {}
                other => {
                    return Err(err(
                        "E005",
                        self.span(),
                        format!(
                            "expected `,` or `)` in the parameters of `{}`, but found {}",
                            name.name,
                            other.describe()
                        ),
                    ))
                }
            }
        }
        self.bump();
        let body = self.block()?;
        let span = self.since(start);
        Ok(FnDecl { name, params, body, span })
    }

    // ----- statements -----

    fn block(&mut self) -> PResult<Block> {
        let open = self.span();
        if *self.peek() != Tok::LBrace {
            return Err(err(
                "E005",
                open,
                format!("expected `{{` to open a block, but found {}", self.peek().describe()),
            ));
        }
        self.bump();
        self.enter(open)?;
        let mut stmts = Vec::new();
        loop {
            self.skip_terms();
            match self.peek() {
                Tok::RBrace => break,
                Tok::Eof => {
                    return Err(err("E005", open, "this block is never closed; add a matching `}`"));
                }
                _ => {}
            }
            let (at, depth) = (self.pos, self.depth);
            match self.stmt().and_then(|st| self.end_of_statement(true).map(|_| st)) {
                Ok(st) => stmts.push(st),
                Err(d) if self.errors.len() < MAX_SYNTAX_ERRORS => {
                    self.errors.push(d);
                    self.depth = depth;
                    self.skip_statement(at);
                }
                Err(d) => return Err(d),
            }
        }
        self.bump();
        self.leave();
        Ok(Block {
            stmts,
            span: self.since(open),
        })
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let start = self.span();
        let word = match self.peek().clone() {
            Tok::Ident(w) => w,
            other => {
                return Err(err("E005", start, format!("expected a statement, but found {}", other.describe())));
            }
        };
        let kind = match word.as_str() {
            "let" => {
                self.bump();
                let name = self.name("the new local's name")?;
                self.expect_tok(Tok::Assign, "after the name in `let x = ...`")?;
                let value = self.value()?;
                StmtKind::Let { name, value }
            }
            "for" => {
                self.bump();
                let var = self.name("the loop variable")?;
                self.expect_word("in", "after the loop variable, as in `for i in 0..N { }`")?;
                let lo = self.expr()?;
                self.expect_tok(Tok::DotDot, "between the loop bounds, as in `for i in 0..N { }`")?;
                let hi = self.expr()?;
                let body = self.block()?;
                StmtKind::For { var, lo, hi, body }
            }
            "if" => return self.if_stmt(),
            "while" => {
                self.bump();
                self.enter(start)?;
                let cond = self.expr()?;
                let body = self.block()?;
                self.leave();
                StmtKind::While { cond, body }
            }
            "syncwarp" if *self.peek_at(1) == Tok::LParen => {
                self.bump();
                if *self.peek_at(1) == Tok::RParen {
                    return Err(err(
                        "E007",
                        self.span(),
                        "`syncwarp` takes no arguments and is written without parentheses: `syncwarp` (or `syncwarp(MASK)` for the lanes of a mask)",
                    ));
                }
                self.bump();
                let mask = self.expr()?;
                self.expect_tok(Tok::RParen, "to close `syncwarp(MASK)`")?;
                StmtKind::SyncWarpMask(mask)
            }
            w if self.fns.iter().any(|f| f == w) && !is_reserved(w) && *self.peek_at(1) == Tok::LParen => {
                let name = self.name("a function name")?;
                self.bump();
                let mut args = Vec::new();
                while *self.peek() != Tok::RParen {
                    args.push(self.expr()?);
                    match self.peek() {
                        Tok::Comma => {
                            self.bump();
                        }
                        Tok::RParen => {}
                        other => {
                            return Err(err(
                                "E005",
                                self.span(),
                                format!(
                                    "expected `,` or `)` in the arguments of `{}`, but found {}",
                                    name.name,
                                    other.describe()
                                ),
                            ))
                        }
                    }
                }
                self.bump();
                StmtKind::Call { name, args }
            }
            "assert" => {
                self.bump();
                StmtKind::Assert(self.expr()?)
            }
            "return" | "work" | "syncwarp" | "syncthreads" | "break" => {
                self.bump();
                if *self.peek() == Tok::LParen {
                    return Err(err(
                        "E007",
                        self.span(),
                        format!("`{word}` takes no arguments and is written without parentheses: `{word}`"),
                    ));
                }
                match word.as_str() {
                    "return" => StmtKind::Return,
                    "work" => StmtKind::Work,
                    "syncwarp" => StmtKind::SyncWarp,
                    "break" => StmtKind::Break,
                    _ => StmtKind::SyncThreads,
                }
            }
            "else" => {
                return Err(err("E005", start, "`else` must follow the `}` of an `if` block"));
            }
            w if OPS.contains(&w) && *self.peek_at(1) == Tok::LParen => StmtKind::Op(self.op()?),
            _ => match self.peek_at(1) {
                Tok::Assign => {
                    let name = self.name("the assigned variable")?;
                    self.bump();
                    let value = self.value()?;
                    StmtKind::Assign { name, value }
                }
                Tok::LParen => return Err(unknown_op(&word, start)),
                _ => {
                    if is_reserved(&word) {
                        return Err(reserved(&word, start, "a statement"));
                    }
                    let hint = match closest(&word, KEYWORDS.iter().chain(OPS).copied()) {
                        Some(k) => format!("; did you mean `{k}`?"),
                        None => "; an assignment is written `x = EXPR`".to_string(),
                    };
                    return Err(err("E005", start, format!("`{word}` does not start a statement{hint}")));
                }
            },
        };
        Ok(Stmt {
            kind,
            span: self.since(start),
        })
    }

    /// `if C { } else if C { } ... else { }`: the arms of a chain are read in a loop (a flat
    /// chain is not nesting) and nested in the tree afterwards, as `else { if ... }`.
    fn if_stmt(&mut self) -> PResult<Stmt> {
        let first = self.span();
        let mut arms = Vec::new();
        let els = loop {
            let start = self.bump().span;
            if arms.len() == MAX_ELSE_IF {
                return Err(err(
                    "E005",
                    start,
                    format!("this `else if` chain has more than {MAX_ELSE_IF} arms; split it, or index a table with `let`"),
                ));
            }
            self.enter(start)?;
            let cond = self.expr()?;
            let then = self.block()?;
            self.leave();
            arms.push((start, cond, then));
            // `}` newline `else` still continues the `if`.
            let mut k = self.pos;
            while self.toks[k].tok == Tok::Newline {
                k += 1;
            }
            if !matches!(&self.toks[k].tok, Tok::Ident(s) if s == "else") {
                break None;
            }
            self.pos = k;
            self.bump();
            if !self.is_word("if") {
                self.enter(first)?;
                let b = self.block()?;
                self.leave();
                break Some(b);
            }
        };
        // Every `if` of the chain ends where the chain ends.
        let end = self.since(first).end;
        let mut els = els;
        let mut stmt = None;
        while let Some((start, cond, then)) = arms.pop() {
            let s = Stmt {
                kind: StmtKind::If { cond, then, els },
                span: Span::new(start.start as usize, end as usize),
            };
            if arms.is_empty() {
                stmt = Some(s);
                break;
            }
            els = Some(Block {
                span: s.span,
                stmts: vec![s],
            });
        }
        Ok(stmt.expect("an if has one arm at least"))
    }

    /// Right side of `let`/assignment: an operation or an expression.
    fn value(&mut self) -> PResult<Value> {
        if let Tok::Ident(w) = self.peek() {
            if OPS.contains(&w.as_str()) && *self.peek_at(1) == Tok::LParen {
                let op = self.op()?;
                if binop(self.peek()).is_some() || *self.peek() == Tok::Dot {
                    return Err(nested_op(op.kind.keyword(), op.span));
                }
                return Ok(Value::Op(op));
            }
        }
        Ok(Value::Expr(self.expr()?))
    }

    fn op(&mut self) -> PResult<Op> {
        let start = self.span();
        let kw = match self.bump().tok {
            Tok::Ident(s) => s,
            _ => unreachable!("op() is called on an operation word"),
        };
        let sig = signature(&kw);
        self.bump(); // `(`
        let mut pos_args: Vec<Arg> = Vec::new();
        let mut named: Vec<(String, Expr, Span)> = Vec::new();
        while *self.peek() != Tok::RParen {
            let at = self.span();
            if let (Tok::Ident(n), Tok::Assign) = (self.peek().clone(), self.peek_at(1).clone()) {
                if !sig.named.contains(&n.as_str()) {
                    let msg = if sig.named.is_empty() {
                        format!("`{kw}` takes no named argument `{n}`; write {}", sig.usage)
                    } else {
                        let hint = match closest(&n, sig.named.iter().copied()) {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => format!("write {}", sig.usage),
                        };
                        format!("`{n}` is not a named argument of `{kw}`; {hint}")
                    };
                    return Err(err("E007", at, msg));
                }
                if named.iter().any(|(m, _, _)| *m == n) {
                    return Err(err("E007", at, format!("`{n}` is given twice in this `{kw}`; keep only one")));
                }
                self.bump();
                self.bump();
                let e = self.expr()?;
                named.push((n, e, self.since(at)));
            } else {
                if !named.is_empty() {
                    return Err(err(
                        "E007",
                        at,
                        format!("positional arguments must come before named ones; write {}", sig.usage),
                    ));
                }
                let Some(slot) = sig.positional.get(pos_args.len()).copied() else {
                    return Err(err(
                        "E007",
                        at,
                        format!("too many arguments to `{kw}`; it is written {}", sig.usage),
                    ));
                };
                pos_args.push(match slot {
                    Slot::Place => Arg::Place(self.place(&kw)?),
                    Slot::Expr => Arg::Expr(self.expr()?),
                });
            }
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {}
                other => {
                    return Err(err(
                        "E005",
                        self.span(),
                        format!("expected `,` or `)` in the arguments of `{kw}`, but found {}", other.describe()),
                    ))
                }
            }
        }
        self.bump(); // `)`
        let span = self.since(start);
        if kw == "elect" {
            return Ok(Op { kind: OpKind::Elect, span });
        }
        match kw.as_str() {
            "commit_group" => {
                return Ok(Op {
                    kind: OpKind::CommitGroup,
                    span,
                })
            }
            "fence_proxy_async" => {
                return Ok(Op {
                    kind: OpKind::FenceProxyAsync,
                    span,
                })
            }
            "fence_mbarrier_init" => {
                return Ok(Op {
                    kind: OpKind::FenceMbarrierInit,
                    span,
                })
            }
            "cluster_arrive" | "cluster_wait" | "cluster_sync" => {
                let kind = match kw.as_str() {
                    "cluster_arrive" => OpKind::ClusterArrive,
                    "cluster_wait" => OpKind::ClusterWait,
                    _ => OpKind::ClusterSync,
                };
                return Ok(Op { kind, span });
            }
            _ => {}
        }
        if pos_args.len() < sig.required {
            return Err(err(
                "E007",
                span,
                format!(
                    "`{kw}` needs {} argument{} but got {}; it is written {}",
                    sig.required,
                    if sig.required == 1 { "" } else { "s" },
                    pos_args.len(),
                    sig.usage
                ),
            ));
        }
        if let Some(kind) = named_barrier_op(&kw, &mut pos_args) {
            return Ok(Op { kind, span });
        }
        let pos_args = match async_proxy_op(&kw, pos_args) {
            Ok(kind) => return Ok(Op { kind, span }),
            Err(args) => args,
        };
        let mut args = pos_args.into_iter();
        let Some(Arg::Place(first)) = args.next() else {
            unreachable!("every operation starts with a place");
        };
        let (second_place, second_expr) = match args.next() {
            Some(Arg::Place(p)) => (Some(p), None),
            Some(Arg::Expr(e)) => (None, Some(e)),
            None => (None, None),
        };
        let req = |e: Option<Expr>| e.expect("a required argument was counted above");
        let mut take_named = |n: &str| named.iter().position(|(m, _, _)| m == n).map(|i| named.remove(i).1);
        // Cluster scope: the target is taken first, the operation then built as for the own CTA.
        let target = match (take_named("cta"), take_named("multicast")) {
            (Some(r), _) => Some(ClusterTarget::Cta(r)),
            (None, Some(m)) => Some(ClusterTarget::Multicast(m)),
            (None, None) => None,
        };
        let kind = match kw.as_str() {
            "arrive" => OpKind::Arrive {
                bar: first,
                n: second_expr,
            },
            "arrive_expect_tx" => OpKind::ArriveExpectTx {
                bar: first,
                bytes: req(second_expr),
            },
            "wait" => OpKind::Wait {
                bar: first,
                token: req(second_expr),
            },
            "wait_parity" => OpKind::WaitParity {
                bar: first,
                parity: req(second_expr),
            },
            "try_wait" => OpKind::TryWait {
                bar: first,
                token: req(second_expr),
            },
            "try_wait_parity" => OpKind::TryWaitParity {
                bar: first,
                parity: req(second_expr),
            },
            "arrive_and_wait" => OpKind::ArriveAndWait { bar: first },
            "arrive_and_drop" => OpKind::ArriveAndDrop { bar: first },
            "expect_tx" => OpKind::ExpectTx {
                bar: first,
                bytes: req(second_expr),
            },
            "complete_tx" => OpKind::CompleteTx {
                bar: first,
                bytes: req(second_expr),
            },
            "copy_async" | "memcpy_async" => {
                let bar = second_place.expect("a required argument was counted above");
                let bytes = take_named("bytes");
                let version = take_named("version");
                if let Some(offset) = take_named("offset") {
                    OpKind::CopyAsyncPart {
                        buf: first,
                        bar,
                        offset,
                        bytes,
                        version,
                        libcu: kw == "memcpy_async",
                    }
                } else if kw == "copy_async" {
                    OpKind::CopyAsync {
                        buf: first,
                        bar,
                        bytes,
                        version,
                    }
                } else {
                    OpKind::MemcpyAsync {
                        buf: first,
                        bar,
                        bytes,
                        version,
                    }
                }
            }
            "read" => {
                let expect = take_named("expect");
                let bytes = take_named("bytes");
                match take_named("offset") {
                    Some(offset) => OpKind::ReadPart {
                        buf: first,
                        offset,
                        bytes,
                        expect,
                    },
                    // `read(BUF, bytes = N)` reads the first N bytes.
                    None if bytes.is_some() => OpKind::ReadPart {
                        buf: first,
                        offset: Expr {
                            kind: ExprKind::Int(0),
                            span,
                        },
                        bytes,
                        expect,
                    },
                    None => OpKind::Read { buf: first, expect },
                }
            }
            "cp_async" => OpKind::CpAsync {
                buf: first,
                offset: take_named("offset"),
                bytes: take_named("bytes"),
                version: take_named("version"),
            },
            "cp_async_arrive" | "cp_async_arrive_noinc" => OpKind::CpAsyncArrive {
                bar: first,
                noinc: kw == "cp_async_arrive_noinc",
            },
            "write" => OpKind::Write {
                buf: first,
                version: req(second_expr),
            },
            "init" => OpKind::Init {
                bar: first,
                count: second_expr,
            },
            "inval" => OpKind::Inval { bar: first },
            "commit" => OpKind::Commit { bar: first },
            _ => unreachable!("every operation word has a case"),
        };
        Ok(match target {
            None => Op { kind, span },
            Some(target) => Op {
                kind: OpKind::Remote {
                    target,
                    op: Box::new(Op { kind, span }),
                },
                span,
            },
        })
    }

    fn place(&mut self, op: &str) -> PResult<Place> {
        let start = self.span();
        let name = match self.peek().clone() {
            Tok::Ident(s) if !is_reserved(&s) => Ident {
                name: s,
                span: self.bump().span,
            },
            Tok::Ident(s) => return Err(reserved(&s, start, "a barrier or buffer")),
            other => {
                return Err(err(
                    "E005",
                    start,
                    format!("expected a barrier or buffer name in `{op}(...)`, but found {}", other.describe()),
                ))
            }
        };
        let index = if *self.peek() == Tok::LBracket {
            self.bump();
            let e = self.expr()?;
            self.expect_tok(Tok::RBracket, "to close the index")?;
            Some(Box::new(e))
        } else {
            None
        };
        Ok(Place {
            name,
            index,
            span: self.since(start),
        })
    }

    // ----- expressions -----

    fn expr(&mut self) -> PResult<Expr> {
        self.binary(1)
    }

    /// Precedence climbing: the loop builds left-associative chains, recursion only goes one
    /// precedence level up (or into parentheses, counted by `enter`). The operator tree's depth is
    /// tracked so that no walk over it can overflow the stack.
    fn binary(&mut self, min_prec: u8) -> PResult<Expr> {
        let (mut lhs, mut d) = (self.unary()?, self.tree_depth);
        while let Some(op) = binop(self.peek()) {
            if op.precedence() < min_prec {
                break;
            }
            self.bump();
            let rhs = self.binary(op.precedence() + 1)?;
            d = d.max(self.tree_depth) + 1;
            let span = lhs.span.to(rhs.span);
            if self.depth + d > MAX_DEPTH {
                return Err(err(
                    "E005",
                    span,
                    format!("this expression nests more than {MAX_DEPTH} operators deep; split it with `let`"),
                ));
            }
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        self.tree_depth = d;
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let start = self.span();
        let op = match self.peek() {
            Tok::Minus => UnOp::Neg,
            Tok::Bang => UnOp::Not,
            _ => return self.primary(),
        };
        self.bump();
        self.enter(start)?;
        let inner = self.unary()?;
        self.leave();
        self.tree_depth += 1;
        let span = start.to(inner.span);
        Ok(Expr {
            kind: ExprKind::Unary(op, Box::new(inner)),
            span,
        })
    }

    /// A primary expression; `tree_depth` is left at its operator depth.
    fn primary(&mut self) -> PResult<Expr> {
        let start = self.span();
        self.tree_depth = 0;
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Int(v),
                    span: start,
                })
            }
            Tok::LParen => {
                self.bump();
                self.enter(start)?;
                let mut e = self.expr()?;
                self.expect_tok(Tok::RParen, "to close the parenthesis")?;
                self.leave();
                e.span = self.since(start);
                Ok(e)
            }
            Tok::Ident(w) => {
                if *self.peek_at(1) == Tok::LParen {
                    if OPS.contains(&w.as_str()) {
                        // Parse it to find its extent, so the caret covers the whole operation.
                        let op = self.op()?;
                        return Err(nested_op(&w, op.span));
                    }
                    return Err(unknown_op(&w, start));
                }
                if *self.peek_at(1) == Tok::Dot {
                    if is_reserved(&w) {
                        return Err(reserved(&w, start, "a role"));
                    }
                    self.bump();
                    self.bump();
                    if !self.is_word("count") {
                        return Err(err(
                            "E005",
                            self.span(),
                            format!(
                                "only `.count` can follow a role name, as in `{w}.count`, but found {}",
                                self.peek().describe()
                            ),
                        ));
                    }
                    self.bump();
                    return Ok(Expr {
                        kind: ExprKind::RoleCount(w),
                        span: self.since(start),
                    });
                }
                if is_reserved(&w) {
                    return Err(reserved(&w, start, "a value"));
                }
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Name(w),
                    span: start,
                })
            }
            other => Err(err(
                "E005",
                start,
                format!("expected an expression, but found {}", other.describe()),
            )),
        }
    }
}

fn kind_list() -> String {
    ViolationKind::ALL
        .iter()
        .map(|k| format!("`{}`", k.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn reserved(word: &str, span: Span, what: &str) -> Diagnostic {
    let role = if OPS.contains(&word) { "an operation name" } else { "a keyword" };
    err(
        "E009",
        Span::new(span.start as usize, span.start as usize + word.len()),
        format!("`{word}` is {role} and cannot be used as {what}; choose another name, such as `{word}_`"),
    )
}

fn nested_op(kw: &str, span: Span) -> Diagnostic {
    err(
        "E008",
        span,
        format!("operations cannot be nested in expressions; bind the result first, as in `let t = {kw}(...)`, then use `t`"),
    )
}

fn unknown_op(word: &str, span: Span) -> Diagnostic {
    let span = Span::new(span.start as usize, span.start as usize + word.len());
    // A typo, or a shortened name whose words all occur in exactly one operation's name
    // (`arrive_wait` for `arrive_and_wait`).
    let by_words = || {
        let parts: Vec<&str> = word.split('_').filter(|p| !p.is_empty()).collect();
        let mut hits = OPS.iter().filter(|op| parts.iter().all(|p| op.split('_').any(|q| q == *p)));
        match (parts.len() > 1, hits.next(), hits.next()) {
            (true, Some(op), None) => Some(*op),
            _ => None,
        }
    };
    match closest(word, OPS.iter().copied()).or_else(by_words) {
        Some(s) => err("E010", span, format!("`{word}` is not an operation; did you mean `{s}`?")),
        None => err(
            "E010",
            span,
            format!(
                "`{word}` is not an operation, and the language has no other calls; the operations are {}",
                OPS.join(", ")
            ),
        ),
    }
}

/// `bar_sync(ID, COUNT)` / `bar_arrive(ID, COUNT)`: the only
/// operations whose arguments are all expressions.
fn named_barrier_op(kw: &str, args: &mut Vec<Arg>) -> Option<OpKind> {
    if kw != "bar_sync" && kw != "bar_arrive" {
        return None;
    }
    let mut it = std::mem::take(args).into_iter().map(|a| match a {
        Arg::Expr(e) => e,
        Arg::Place(_) => unreachable!("named barrier arguments are expressions"),
    });
    let (id, count) = (it.next()?, it.next()?);
    Some(if kw == "bar_sync" {
        OpKind::BarSync { id, count }
    } else {
        OpKind::BarArrive { id, count }
    })
}

/// The async-proxy operations whose arguments do not start with a barrier, built from
/// their positional arguments (already counted against the signature); `Err` gives the
/// arguments back for every other operation.
fn async_proxy_op(kw: &str, args: Vec<Arg>) -> Result<OpKind, Vec<Arg>> {
    let places = |args: Vec<Arg>| -> Vec<Place> {
        args.into_iter()
            .filter_map(|a| if let Arg::Place(p) = a { Some(p) } else { None })
            .collect()
    };
    let first_expr = |args: Vec<Arg>| -> Expr {
        args.into_iter()
            .find_map(|a| if let Arg::Expr(e) = a { Some(e) } else { None })
            .expect("a required argument was counted above")
    };
    Ok(match kw {
        "copy_store_async" => OpKind::CopyStoreAsync {
            buf: places(args).remove(0),
        },
        "wgmma_async" => OpKind::WgmmaAsync { bufs: places(args) },
        "wait_group" | "wait_group_read" => OpKind::WaitGroup {
            n: first_expr(args),
            read: kw == "wait_group_read",
        },
        "wgmma_wait" => OpKind::WgmmaWait { n: first_expr(args) },
        _ => return Err(args),
    })
}
