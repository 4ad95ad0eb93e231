//! A parser for the PTX text NVRTC emits: module directives, `.entry`/`.func` with their
//! params, register and shared declarations, labels, `{ }` scopes (inline asm brings its own
//! registers and labels, which this parser renames so that each scope's names stay its own),
//! guards and `.loc` lines. What the importer does not need (`.section` bodies, debug strings)
//! is skipped by its braces, never guessed at.

use std::collections::HashMap;

/// A place in the PTX text, 1-based.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// A malformed PTX text: where and what.
#[derive(Clone, Debug)]
pub struct PtxError {
    pub pos: Pos,
    pub message: String,
}

/// A source position from `.loc`: file index, line, column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loc {
    pub file: u32,
    pub line: u32,
    pub col: u32,
}

/// Where an instruction came from: the innermost `.loc` and, when it was inlined, the
/// outermost call site (the line of the kernel itself).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrcLoc {
    pub inner: Option<Loc>,
    pub outer: Option<Loc>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    Reg(String),
    Imm(i64),
    /// A symbol: a variable, a param, a label or a function name.
    Sym(String),
    /// `[base+off]`.
    Addr(Box<Operand>, i64),
    /// `{a, b}` or `(a, b)`.
    List(Vec<Operand>),
    /// `a|b` (two destinations).
    Pair(Box<Operand>, Box<Operand>),
    /// `_`.
    Sink,
    /// Anything else (float literals, `{...}` with arithmetic): kept as text.
    Other(String),
}

#[derive(Clone, Debug)]
pub struct Instr {
    /// `@p` (false) or `@!p` (true).
    pub guard: Option<(String, bool)>,
    pub opcode: String,
    pub operands: Vec<Operand>,
    pub pos: Pos,
    pub src: SrcLoc,
}

impl Instr {
    /// The dot-separated parts of the opcode (`mbarrier`, `try_wait`, `parity`, ...).
    pub fn parts(&self) -> Vec<&str> {
        self.opcode.split('.').collect()
    }
    pub fn has(&self, part: &str) -> bool {
        self.opcode.split('.').any(|p| p == part)
    }
}

#[derive(Clone, Debug)]
pub struct SharedVar {
    pub name: String,
    pub align: u32,
    /// Bytes; `None` for `.extern` arrays without a size.
    pub bytes: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub is_entry: bool,
    pub params: Vec<String>,
    pub rets: Vec<String>,
    pub body: Vec<Instr>,
    /// Label name (after scope renaming) -> index of the next instruction.
    pub labels: HashMap<String, usize>,
    pub reqntid: Option<[u32; 3]>,
    pub maxntid: Option<[u32; 3]>,
    pub pos: Pos,
}

#[derive(Clone, Debug, Default)]
pub struct Module {
    pub version: Option<String>,
    pub target: Vec<String>,
    pub address_size: Option<u32>,
    pub files: HashMap<u32, String>,
    pub shared: Vec<SharedVar>,
    pub functions: Vec<Function>,
}

impl Module {
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name && !f.body.is_empty())
    }
    pub fn shared_var(&self, name: &str) -> Option<&SharedVar> {
        self.shared.iter().find(|s| s.name == name)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Str(String),
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    pos: Pos,
}

fn err<T>(pos: Pos, message: impl Into<String>) -> Result<T, PtxError> {
    Err(PtxError {
        pos,
        message: message.into(),
    })
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%' | '.')
}

fn lex(src: &str) -> Result<Vec<Token>, PtxError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    macro_rules! bump {
        () => {{
            if chars[i] == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
            i += 1;
        }};
    }
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos { line, col };
        if c.is_whitespace() {
            bump!();
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                bump!();
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            bump!();
            bump!();
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                bump!();
            }
            if i >= chars.len() {
                return err(pos, "this block comment is never closed");
            }
            bump!();
            bump!();
        } else if c == '"' {
            bump!();
            let mut s = String::new();
            while i < chars.len() && chars[i] != '"' && chars[i] != '\n' {
                s.push(chars[i]);
                bump!();
            }
            if i >= chars.len() || chars[i] != '"' {
                return err(pos, "this string is not closed on its line");
            }
            bump!();
            out.push(Token { tok: Tok::Str(s), pos });
        } else if c.is_ascii_digit() {
            let mut s = String::new();
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                s.push(chars[i]);
                bump!();
            }
            out.push(Token {
                tok: match parse_int(&s) {
                    Some(v) => Tok::Int(v),
                    None => Tok::Ident(s),
                },
                pos,
            });
        } else if is_ident_start(c) {
            let mut s = String::new();
            while i < chars.len() {
                let d = chars[i];
                if d.is_ascii_alphanumeric() || matches!(d, '_' | '$' | '%' | '.') {
                    s.push(d);
                    bump!();
                } else if d == ':' && chars.get(i + 1) == Some(&':') {
                    s.push_str("::");
                    bump!();
                    bump!();
                } else {
                    break;
                }
            }
            out.push(Token { tok: Tok::Ident(s), pos });
        } else if "{}()[],;:|@!+-<>=".contains(c) {
            out.push(Token { tok: Tok::Punct(c), pos });
            bump!();
        } else {
            return err(pos, format!("`{c}` is not a character PTX uses here"));
        }
    }
    Ok(out)
}

/// PTX integers: decimal, `0x` hex, octal with a leading 0, binary `0b`, an optional `U` suffix.
fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim_end_matches('U');
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|v| v as i64);
    }
    if let Some(b) = t.strip_prefix("0b") {
        return u64::from_str_radix(b, 2).ok().map(|v| v as i64);
    }
    if t.len() > 1 && t.starts_with('0') && t.chars().all(|c| c.is_ascii_digit()) {
        return u64::from_str_radix(&t[1..], 8).ok().map(|v| v as i64);
    }
    t.parse::<u64>().ok().map(|v| v as i64)
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    end: Pos,
    /// For each source position a `.loc` named (file, line, col), the outermost call site it
    /// was inlined from, as the latest such `.loc` said: a chain of `inlined_at`s (a helper
    /// inlined into a helper inlined into the kernel) resolves to the kernel's line.
    outermost: HashMap<(u32, u32, u32), Loc>,
}

/// One item of a function body before names are resolved.
enum Item {
    Instr(Instr, usize),
    Label(String, usize, Pos),
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }
    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }
    fn pos(&self) -> Pos {
        self.toks.get(self.i).map_or(self.end, |t| t.pos)
    }
    fn next(&mut self) -> Result<Token, PtxError> {
        match self.toks.get(self.i) {
            Some(t) => {
                self.i += 1;
                Ok(t.clone())
            }
            None => err(self.end, "the PTX ends in the middle of a statement"),
        }
    }
    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Punct(c))
    }
    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect_punct(&mut self, c: char) -> Result<(), PtxError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            err(self.pos(), format!("expected `{c}` here"))
        }
    }
    fn ident(&mut self) -> Result<String, PtxError> {
        let t = self.next()?;
        match t.tok {
            Tok::Ident(s) => Ok(s),
            _ => err(t.pos, "expected a name here"),
        }
    }
    fn int(&mut self) -> Result<i64, PtxError> {
        let t = self.next()?;
        match t.tok {
            Tok::Int(v) => Ok(v),
            _ => err(t.pos, "expected an integer here"),
        }
    }
    fn skip_to_semicolon(&mut self) -> Result<Vec<Token>, PtxError> {
        let mut v = Vec::new();
        loop {
            let t = self.next()?;
            if t.tok == Tok::Punct(';') {
                return Ok(v);
            }
            v.push(t);
        }
    }
    fn skip_braces(&mut self) -> Result<(), PtxError> {
        let open = self.pos();
        self.expect_punct('{')?;
        let mut depth = 1;
        while depth > 0 {
            match self.toks.get(self.i) {
                None => return err(open, "this `{` is never closed"),
                Some(t) => {
                    if t.tok == Tok::Punct('{') {
                        depth += 1;
                    } else if t.tok == Tok::Punct('}') {
                        depth -= 1;
                    }
                    self.i += 1;
                }
            }
        }
        Ok(())
    }

    fn module(&mut self) -> Result<Module, PtxError> {
        let mut m = Module::default();
        while let Some(tok) = self.peek().cloned() {
            let pos = self.pos();
            let Tok::Ident(word) = tok else {
                return err(pos, "expected a directive (`.version`, `.entry`, ...) here");
            };
            match word.as_str() {
                ".version" => {
                    self.i += 1;
                    let t = self.next()?;
                    m.version = Some(match t.tok {
                        Tok::Ident(s) => s,
                        Tok::Int(v) => v.to_string(),
                        _ => return err(t.pos, "expected a version number after `.version`"),
                    });
                }
                ".target" => {
                    self.i += 1;
                    m.target.push(self.ident()?);
                    while self.eat_punct(',') {
                        m.target.push(self.ident()?);
                    }
                }
                ".address_size" => {
                    self.i += 1;
                    m.address_size = Some(self.int()? as u32);
                }
                ".file" => {
                    self.i += 1;
                    let n = self.int()? as u32;
                    let t = self.next()?;
                    let Tok::Str(name) = t.tok else {
                        return err(t.pos, "expected the file name in quotes after `.file N`");
                    };
                    // optional `, timestamp, size`
                    while self.eat_punct(',') {
                        self.next()?;
                    }
                    m.files.insert(n, name);
                }
                ".section" => {
                    self.i += 1;
                    self.ident()?;
                    self.skip_braces()?;
                }
                ".visible" | ".extern" | ".weak" | ".entry" | ".func" | ".global" | ".shared" | ".const" => {
                    self.toplevel(&mut m)?;
                }
                ".pragma" => {
                    self.i += 1;
                    self.skip_to_semicolon()?;
                }
                _ => return err(pos, format!("`{word}` is not a module directive the importer knows")),
            }
        }
        Ok(m)
    }

    fn toplevel(&mut self, m: &mut Module) -> Result<(), PtxError> {
        let start = self.pos();
        let mut is_extern = false;
        loop {
            match self.peek() {
                Some(Tok::Ident(s)) if s == ".visible" || s == ".weak" => self.i += 1,
                Some(Tok::Ident(s)) if s == ".extern" => {
                    is_extern = true;
                    self.i += 1
                }
                _ => break,
            }
        }
        let kind = self.ident()?;
        match kind.as_str() {
            ".entry" | ".func" => {
                let f = self.function(kind == ".entry", start)?;
                if let Some(f) = f {
                    m.shared.extend(f.1);
                    m.functions.push(f.0);
                }
                Ok(())
            }
            ".shared" => {
                let v = self.var_decl(is_extern)?;
                m.shared.push(v);
                Ok(())
            }
            _ => {
                self.skip_to_semicolon()?;
                Ok(())
            }
        }
    }

    /// After `.shared`: `.align N .b8 name[LEN];` (the state space already eaten).
    fn var_decl(&mut self, is_extern: bool) -> Result<SharedVar, PtxError> {
        let toks = self.skip_to_semicolon()?;
        let mut align = 1;
        let mut elem = 1u64;
        let mut name = None;
        let mut dims: Vec<Option<u64>> = Vec::new();
        let mut k = 0;
        while k < toks.len() {
            match &toks[k].tok {
                Tok::Ident(s) if s == ".align" => {
                    if let Some(Tok::Int(v)) = toks.get(k + 1).map(|t| &t.tok) {
                        align = *v as u32;
                        k += 1;
                    }
                }
                Tok::Ident(s) if s.starts_with('.') => {
                    if let Some(w) = type_bytes(s) {
                        elem = w;
                    }
                }
                Tok::Ident(s) if name.is_none() => name = Some(s.clone()),
                Tok::Punct('[') => match toks.get(k + 1).map(|t| &t.tok) {
                    Some(Tok::Int(v)) => {
                        dims.push(Some(*v as u64));
                        k += 2;
                    }
                    _ => {
                        dims.push(None);
                        k += 1;
                    }
                },
                Tok::Punct('=') => break,
                _ => {}
            }
            k += 1;
        }
        let Some(name) = name else {
            return err(
                toks.first().map_or(self.pos(), |t| t.pos),
                "this `.shared` declaration names no variable",
            );
        };
        let bytes = dims
            .iter()
            .try_fold(elem, |acc, d| d.map(|d| acc * d))
            .filter(|_| !(is_extern && dims.iter().any(|d| d.is_none())));
        Ok(SharedVar { name, align, bytes })
    }

    fn param_list(&mut self) -> Result<Vec<String>, PtxError> {
        let mut names = Vec::new();
        self.expect_punct('(')?;
        let mut depth = 1;
        let mut last_ident = None;
        while depth > 0 {
            let t = self.next()?;
            match t.tok {
                Tok::Punct('(') => depth += 1,
                Tok::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        if let Some(n) = last_ident.take() {
                            names.push(n);
                        }
                    }
                }
                Tok::Punct(',') if depth == 1 => {
                    if let Some(n) = last_ident.take() {
                        names.push(n);
                    }
                }
                Tok::Ident(s) if !s.starts_with('.') => last_ident = Some(s),
                _ => {}
            }
        }
        Ok(names)
    }

    fn function(&mut self, is_entry: bool, start: Pos) -> Result<Option<(Function, Vec<SharedVar>)>, PtxError> {
        let mut rets = Vec::new();
        if self.is_punct('(') {
            rets = self.param_list()?;
        }
        let name = self.ident()?;
        let params = if self.is_punct('(') { self.param_list()? } else { Vec::new() };
        let (mut reqntid, mut maxntid) = (None, None);
        loop {
            match self.peek().cloned() {
                Some(Tok::Punct(';')) => {
                    self.i += 1;
                    return Ok(None); // a prototype
                }
                Some(Tok::Punct('{')) => break,
                Some(Tok::Ident(d)) => {
                    self.i += 1;
                    if d == ".reqntid" || d == ".maxntid" {
                        let mut v = [1u32; 3];
                        v[0] = self.int()? as u32;
                        for slot in v.iter_mut().skip(1) {
                            if !self.eat_punct(',') {
                                break;
                            }
                            *slot = self.int()? as u32;
                        }
                        if d == ".reqntid" {
                            reqntid = Some(v);
                        } else {
                            maxntid = Some(v);
                        }
                    } else {
                        while matches!(self.peek(), Some(Tok::Int(_)) | Some(Tok::Punct(','))) {
                            self.i += 1;
                        }
                    }
                }
                _ => return err(self.pos(), format!("expected the body of `{name}` here")),
            }
        }
        let (body, labels, shared) = self.body()?;
        Ok(Some((
            Function {
                name,
                is_entry,
                params,
                rets,
                body,
                labels,
                reqntid,
                maxntid,
                pos: start,
            },
            shared,
        )))
    }

    fn loc(&mut self) -> Result<SrcLoc, PtxError> {
        let inner = Loc {
            file: self.int()? as u32,
            line: self.int()? as u32,
            col: self.int()? as u32,
        };
        let mut outer = inner;
        while self.eat_punct(',') {
            let key = self.ident()?;
            if key == "inlined_at" {
                let at = Loc {
                    file: self.int()? as u32,
                    line: self.int()? as u32,
                    col: self.int()? as u32,
                };
                outer = self.outermost.get(&(at.file, at.line, at.col)).copied().unwrap_or(at);
            } else {
                self.next()?;
            }
        }
        self.outermost.insert((inner.file, inner.line, inner.col), outer);
        Ok(SrcLoc {
            inner: Some(inner),
            outer: Some(outer),
        })
    }

    /// A body: instructions with their scope, labels per scope, then names resolved.
    #[allow(clippy::type_complexity)]
    fn body(&mut self) -> Result<(Vec<Instr>, HashMap<String, usize>, Vec<SharedVar>), PtxError> {
        let open = self.pos();
        self.expect_punct('{')?;
        let mut items = Vec::new();
        let mut shared = Vec::new();
        let mut parent: Vec<Option<usize>> = vec![None];
        let mut regs: Vec<Vec<String>> = vec![Vec::new()];
        let mut labels: Vec<Vec<String>> = vec![Vec::new()];
        let mut stack = vec![0usize];
        let mut src = SrcLoc::default();
        let mut n_instr = 0;
        loop {
            let pos = self.pos();
            let Some(tok) = self.peek().cloned() else {
                return err(open, "this function body is never closed");
            };
            match tok {
                Tok::Punct('{') => {
                    self.i += 1;
                    parent.push(stack.last().copied());
                    regs.push(Vec::new());
                    labels.push(Vec::new());
                    stack.push(parent.len() - 1);
                }
                Tok::Punct('}') => {
                    self.i += 1;
                    stack.pop();
                    if stack.is_empty() {
                        break;
                    }
                }
                Tok::Ident(w) if self.peek_at(1) == Some(&Tok::Punct(':')) && !w.starts_with('%') => {
                    self.i += 2;
                    let scope = *stack.last().unwrap_or(&0);
                    labels[scope].push(w.clone());
                    items.push(Item::Label(w, scope, pos));
                }
                Tok::Ident(w) if w == ".loc" => {
                    self.i += 1;
                    src = self.loc()?;
                }
                Tok::Ident(w) if w == ".reg" => {
                    self.i += 1;
                    let scope = *stack.last().unwrap_or(&0);
                    for t in self.skip_to_semicolon()? {
                        if let Tok::Ident(s) = t.tok {
                            if !s.starts_with('.') {
                                regs[scope].push(s);
                            }
                        }
                    }
                }
                Tok::Ident(w) if w == ".shared" => {
                    self.i += 1;
                    shared.push(self.var_decl(false)?);
                }
                Tok::Ident(w) if w.starts_with('.') => {
                    // .local, .param, .pragma, .maxnreg, ...: nothing the protocol needs
                    self.i += 1;
                    self.skip_to_semicolon()?;
                }
                _ => {
                    let ins = self.instr(src)?;
                    let scope = *stack.last().unwrap_or(&0);
                    items.push(Item::Instr(ins, scope));
                    n_instr += 1;
                }
            }
        }
        let _ = n_instr;
        // Resolve scoped names: a name declared in a nested scope becomes `name#scope`.
        let resolve = |name: &str, scope: usize, decl: &Vec<Vec<String>>| -> String {
            let mut s = Some(scope);
            while let Some(k) = s {
                if k == 0 {
                    break;
                }
                if decl[k].iter().any(|d| d == name) {
                    return format!("{name}#{k}");
                }
                s = parent[k];
            }
            name.to_string()
        };
        let mut body = Vec::new();
        let mut label_at = HashMap::new();
        for item in items {
            match item {
                Item::Label(name, scope, pos) => {
                    let n = resolve(&name, scope, &labels);
                    if label_at.insert(n, body.len()).is_some() {
                        return err(pos, format!("the label `{name}` is defined twice in one scope"));
                    }
                }
                Item::Instr(mut ins, scope) => {
                    if let Some((g, neg)) = &ins.guard {
                        ins.guard = Some((resolve(g, scope, &regs), *neg));
                    }
                    fn walk(o: &mut Operand, f: &dyn Fn(&str, bool) -> String) {
                        match o {
                            Operand::Reg(r) => *r = f(r, false),
                            Operand::Sym(s) => *s = f(s, true),
                            Operand::Addr(b, _) => walk(b, f),
                            Operand::List(v) => v.iter_mut().for_each(|x| walk(x, f)),
                            Operand::Pair(a, b) => {
                                walk(a, f);
                                walk(b, f)
                            }
                            _ => {}
                        }
                    }
                    let f = |n: &str, sym: bool| {
                        let r = resolve(n, scope, &regs);
                        if r != n || !sym {
                            r
                        } else {
                            resolve(n, scope, &labels)
                        }
                    };
                    for o in ins.operands.iter_mut() {
                        walk(o, &f);
                        as_reg(o, &|n: &str| {
                            regs.iter().any(|r| r.iter().any(|d| d == n.split('#').next().unwrap_or(n)))
                        });
                    }

                    body.push(ins);
                }
            }
        }
        Ok((body, label_at, shared))
    }

    fn instr(&mut self, src: SrcLoc) -> Result<Instr, PtxError> {
        let pos = self.pos();
        let mut guard = None;
        if self.eat_punct('@') {
            let neg = self.eat_punct('!');
            guard = Some((self.ident()?, neg));
        }
        let opcode = match self.next()?.tok {
            Tok::Ident(s) => s,
            _ => return err(pos, "expected an instruction here"),
        };
        let mut operands = Vec::new();
        if !self.is_punct(';') {
            loop {
                operands.push(self.operand()?);
                if self.eat_punct(',') {
                    continue;
                }
                if self.eat_punct(';') {
                    break;
                }
                return err(self.pos(), format!("expected `,` or `;` after an operand of `{opcode}`"));
            }
        } else {
            self.i += 1;
        }
        Ok(Instr {
            guard,
            opcode,
            operands,
            pos,
            src,
        })
    }

    fn operand(&mut self) -> Result<Operand, PtxError> {
        let a = self.operand1()?;
        if self.eat_punct('|') {
            let b = self.operand1()?;
            return Ok(Operand::Pair(Box::new(a), Box::new(b)));
        }
        Ok(a)
    }

    fn operand1(&mut self) -> Result<Operand, PtxError> {
        let pos = self.pos();
        let t = self.next()?;
        match t.tok {
            Tok::Punct('[') => {
                let base = self.operand1()?;
                let mut off = 0;
                while self.is_punct('+') || self.is_punct('-') {
                    let mut neg = self.next()?.tok == Tok::Punct('-');
                    // `[%rd2+-2480]`: NVCC writes a negative offset after the `+`
                    if self.eat_punct('-') {
                        neg = !neg;
                    }
                    let v = self.int()?;
                    off += if neg { -v } else { v };
                }
                // a tensor operand `[tmap, {c0, c1}]`: the coordinates do not matter here
                while self.eat_punct(',') {
                    self.operand1()?;
                }
                self.expect_punct(']')?;
                Ok(Operand::Addr(Box::new(base), off))
            }
            Tok::Punct(open @ ('{' | '(')) => {
                let close = if open == '{' { '}' } else { ')' };
                let mut v = Vec::new();
                if !self.eat_punct(close) {
                    loop {
                        v.push(self.operand()?);
                        if self.eat_punct(',') {
                            continue;
                        }
                        self.expect_punct(close)?;
                        break;
                    }
                }
                Ok(Operand::List(v))
            }
            Tok::Punct('-') => match self.next()?.tok {
                Tok::Int(v) => Ok(Operand::Imm(v.wrapping_neg())),
                Tok::Ident(s) => Ok(Operand::Other(format!("-{s}"))),
                _ => err(pos, "expected a number after `-`"),
            },
            Tok::Punct('!') => {
                let inner = self.operand1()?;
                Ok(Operand::Other(format!("!{inner:?}")))
            }
            Tok::Int(v) => Ok(Operand::Imm(v)),
            Tok::Ident(s) if s == "_" => Ok(Operand::Sink),
            Tok::Ident(s) if s.starts_with('%') => Ok(Operand::Reg(s)),
            Tok::Ident(s) if s.starts_with("0f") || s.starts_with("0d") => Ok(Operand::Other(s)),
            Tok::Ident(s) => Ok(Operand::Sym(s)),
            _ => err(pos, "expected an operand here"),
        }
    }
}

/// A name inline asm declared with `.reg` but without `%` is a register, not a symbol.
fn as_reg(o: &mut Operand, is_reg: &dyn Fn(&str) -> bool) {
    match o {
        Operand::Sym(s) if is_reg(s) => *o = Operand::Reg(s.clone()),
        Operand::Addr(b, _) => as_reg(b, is_reg),
        Operand::List(v) => v.iter_mut().for_each(|x| as_reg(x, is_reg)),
        Operand::Pair(a, b) => {
            as_reg(a, is_reg);
            as_reg(b, is_reg)
        }
        _ => {}
    }
}

/// Bytes of a PTX scalar type (`.b64` 8, `.u32` 4, ...).
pub fn type_bytes(t: &str) -> Option<u64> {
    let t = t.trim_start_matches('.');
    let bits: u64 = t.get(1..)?.parse().ok()?;
    matches!(t.as_bytes().first(), Some(b'b' | b'u' | b's' | b'f')).then_some(bits / 8)
}

/// Parse a PTX module.
pub fn parse(src: &str) -> Result<Module, PtxError> {
    let toks = lex(src)?;
    let lines = src.lines().count() as u32;
    let mut p = Parser {
        toks,
        i: 0,
        end: Pos {
            line: lines.max(1),
            col: 1,
        },
        outermost: HashMap::new(),
    };
    p.module()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_labels_and_registers_are_renamed_per_scope() {
        let m = parse(
            ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<3>;\n{\n.reg .pred P1;\nW:\n@!P1 bra W;\n}\n{\n.reg .pred P1;\nW:\n@!P1 bra W;\n}\nret;\n}\n",
        )
        .unwrap();
        let f = &m.functions[0];
        assert_eq!(f.body.len(), 3);
        assert_eq!(f.body[0].guard.as_ref().unwrap().0, "P1#1");
        assert_eq!(f.body[1].guard.as_ref().unwrap().0, "P1#2");
        assert_eq!(f.labels["W#2"], 1);
    }
}
