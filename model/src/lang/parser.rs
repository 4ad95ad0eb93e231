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

mod blackwell;
mod expressions;
mod ops;
mod statements;

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
    "cp_async_commit_group",
    "cp_async_wait_group",
    "cp_async_wait_all",
    "st_async",
    // The async proxy.
    "copy_store_async",
    "commit_group",
    "wait_group",
    "wait_group_read",
    "wgmma_async",
    "wgmma_wait",
    "warpgroup_mma",
    "warpgroup_wait",
    "fence_proxy_async",
    "fence_mbarrier_init",
    // TMA descriptors in shared memory.
    "tensormap_write",
    "fence_proxy_tensormap",
    // Counters (DSMEM atomics).
    "atomic_add",
    "read_counter",
    // Cluster scope.
    "cluster_arrive",
    "cluster_arrive_relaxed",
    "cluster_wait",
    "cluster_sync",
    // Blackwell (lang::blackwell).
    "tcgen05_mma",
    "tcgen05_commit",
    "tmem_alloc",
    "tmem_dealloc",
    "tmem_relinquish",
    "tcgen05_ld",
    "tcgen05_wait_ld",
    "clc_try_cancel",
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
    "tensormap",
    "counter",
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

    /// After an item of a parenthesised list: a `,` (taken) or the closing `)` (left for the
    /// caller); `what` names the list in the message ("the arguments of `f`").
    fn list_separator(&mut self, what: &str) -> PResult<()> {
        match self.peek() {
            Tok::Comma => {
                self.bump();
                Ok(())
            }
            Tok::RParen => Ok(()),
            other => Err(err(
                "E005",
                self.span(),
                format!("expected `,` or `)` in {what}, but found {}", other.describe()),
            )),
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
                "tensormap" => items.push(Item::Buffer(self.tensormap()?)),
                "counter" => items.push(Item::Buffer(self.counter()?)),
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
                        "tensormap",
                        "counter",
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
        Ok(BufferDecl {
            name,
            len,
            bytes,
            tensormap: false,
            counter: false,
            span,
        })
    }

    /// `counter NAME` (or `counter NAME[N]`): a 32-bit value cell in shared memory (the `u32`
    /// that `atomicAdd` updates), always 4 bytes, so it takes no size.
    fn counter(&mut self) -> PResult<BufferDecl> {
        let start = self.bump().span;
        let name = self.name("a counter name")?;
        let len = self.opt_len()?;
        let span = self.since(start);
        let bytes = Expr {
            kind: ExprKind::Int(4),
            span,
        };
        Ok(BufferDecl {
            name,
            len,
            bytes,
            tensormap: false,
            counter: true,
            span,
        })
    }

    /// `tensormap NAME` (or `tensormap NAME[N]`): a TMA descriptor in shared memory, always the
    /// 128 bytes of a `CUtensorMap`, so it takes no size.
    fn tensormap(&mut self) -> PResult<BufferDecl> {
        let start = self.bump().span;
        let name = self.name("a tensormap name")?;
        let len = self.opt_len()?;
        let span = self.since(start);
        let bytes = Expr {
            kind: ExprKind::Int(128),
            span,
        };
        Ok(BufferDecl {
            name,
            len,
            bytes,
            tensormap: true,
            counter: false,
            span,
        })
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
            self.list_separator(&format!("the parameters of `{}`", name.name))?;
        }
        self.bump();
        let body = self.block()?;
        let span = self.since(start);
        Ok(FnDecl { name, params, body, span })
    }

    // ----- statements -----

    // ----- expressions -----
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
