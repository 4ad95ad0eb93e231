//! C++ spelling: the expression printer (values of the spec's expressions, in the wrapping
//! arithmetic the model defines), the names and places of the spec's objects in the kernel's
//! shared state, and spec text made safe for generated comments.

use super::Gen;
use phasecheck_model::lang::ast::{BinOp, UnOp};
use phasecheck_model::program::ir::*;

pub(super) fn ident(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if out.is_empty() || out.as_bytes()[0].is_ascii_digit() {
        out.insert(0, '_');
    }
    out
}

/// Longest spec text quoted in one generated comment (in characters, before escaping).
const COMMENT_CHARS: usize = 120;

/// Spec text made safe to sit inside a generated `//` comment: the result is printable ASCII with
/// no backslash (no line continuation), no `??` (no trigraph), no `*/` and no `/*`. Every other
/// character, control characters (CR, VT, FF, NEL, LS, ...) included, is written `<U+XXXX>`.
/// Long text is cut with `...`.
pub fn comment_text(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == COMMENT_CHARS {
            out.push_str("...");
            break;
        }
        let prev = out.as_bytes().last().copied();
        let safe = matches!(c, ' '..='~')
            && c != '\\'
            && !(c == '?' && prev == Some(b'?'))
            && !(c == '/' && prev == Some(b'*'))
            && !(c == '*' && prev == Some(b'/'));
        if safe {
            out.push(c);
        } else {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
    }
    out
}

/// 1-based line of a byte offset, and the text of that line (trimmed), made comment-safe. Lines
/// end at `\n` as the spec's lexer counts them; any other line break in the text is escaped.
pub(super) fn line_of(source: &str, offset: u32) -> (usize, String) {
    let mut off = (offset as usize).min(source.len());
    while !source.is_char_boundary(off) {
        off -= 1;
    }
    let line = source[..off].matches('\n').count() + 1;
    let start = source[..off].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = source[off..].find('\n').map(|i| off + i).unwrap_or(source.len());
    (line, comment_text(source[start..end].trim()))
}

impl Gen<'_> {
    pub(super) fn local_name(code: &Code, slot: u16) -> String {
        let n = &code.local_names[slot as usize];
        let n = n.trim_start_matches('$');
        format!("{}_{}", ident(n), slot)
    }

    pub(super) fn expr(&self, code: &Code, e: &IExpr) -> String {
        match e {
            // -9223372036854775808LL is `-` applied to a literal no type holds.
            IExpr::Const(v) if *v == i64::MIN => "(-9223372036854775807LL - 1)".into(),
            IExpr::Const(v) => format!("{v}LL"),
            IExpr::Local(s) => Self::local_name(code, *s),
            IExpr::Var(v) => format!("s.{}", self.var_name(*v)),
            // A lane of a uniform agent at a per-lane offset: lane k of the agent is the agent's
            // identity plus k (model/src/rt/uniform_agent.rs, `lanes_at_offsets`).
            IExpr::Tid if self.lane_identity => "(i64)(th.tid + u.lane)".into(),
            IExpr::Gtid if self.lane_identity => "(i64)(th.gtid + u.lane)".into(),
            IExpr::Lane if self.lane_identity => "(i64)(th.lane + u.lane)".into(),
            IExpr::Tid => "(i64)th.tid".into(),
            IExpr::Gtid => "(i64)th.gtid".into(),
            IExpr::Lane => "(i64)th.lane".into(),
            IExpr::Warp => "(i64)th.warp".into(),
            IExpr::Unary(UnOp::Neg, a) => format!("(i64)(0ULL - (u64)({}))", self.expr(code, a)),
            IExpr::Unary(UnOp::Not, a) => format!("(i64)!{}", self.expr(code, a)),
            IExpr::Binary(op, a, b) => {
                let (a, b) = (self.expr(code, a), self.expr(code, b));
                match op {
                    BinOp::Div => format!("pc_div({a}, {b})"),
                    BinOp::Rem => format!("pc_rem({a}, {b})"),
                    _ => {
                        // The language's operators are C's, with the same precedence once
                        // parenthesised: `BinOp::symbol` spells them.
                        let o = op.symbol();
                        if matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul) {
                            // In unsigned arithmetic: signed overflow would be undefined
                            // behaviour, which lets the compiler drop the index checks after it
                            // (the model reports the overflow; the kernel must stay in bounds).
                            format!("(i64)((u64)({a}) {o} (u64)({b}))")
                        } else {
                            format!("(i64)({a} {o} {b})")
                        }
                    }
                }
            }
        }
    }

    pub(super) fn var_name(&self, v: u16) -> String {
        let per = self.p.vars.len() / self.cluster;
        format!("var_{}", ident(self.declared(&self.p.vars[v as usize % per.max(1)].name)))
    }

    /// A lowered object's name as declared: without the `ctaN.` the lowering gives each CTA's copy.
    pub(super) fn declared<'n>(&self, name: &'n str) -> &'n str {
        if self.cluster > 1 {
            name.split_once('.').map_or(name, |(_, rest)| rest)
        } else {
            name
        }
    }

    /// The group of this CTA's shared memory that holds lowered group `g` (every CTA's copy of a
    /// declared object sits at the same place in its own CTA).
    pub(super) fn local_group(&self, g: u16, barrier: bool) -> usize {
        let n = if barrier {
            self.p.barrier_groups.len()
        } else {
            self.p.buffer_groups.len()
        };
        g as usize % (n / self.cluster).max(1)
    }

    /// [`Gen::place`], with its index check (if any) written first at `indent`.
    pub(super) fn placed(&mut self, code: &Code, r: &Ref, barrier: bool, indent: &str) -> String {
        let (d, chk) = self.place(code, r, barrier);
        if let Some(c) = chk {
            self.w(format!("{indent}{c}"));
        }
        d
    }

    /// `s.full[idx]` for a barrier reference, with a bounds check statement when indexed.
    pub(super) fn place(&self, code: &Code, r: &Ref, barrier: bool) -> (String, Option<String>) {
        let lg = self.local_group(r.group, barrier);
        let (gname, len, is_array) = if barrier {
            let g = &self.p.barrier_groups[lg];
            (format!("bar_{}", ident(self.declared(&g.name))), g.len, g.is_array)
        } else {
            let g = &self.p.buffer_groups[lg];
            (format!("buf_{}", ident(self.declared(&g.name))), g.len, g.is_array)
        };
        match &r.index {
            None if !is_array => (format!("s.{gname}"), None),
            None => (format!("s.{gname}[0]"), None),
            Some(IExpr::Const(i)) if (0..len as i64).contains(i) => (format!("s.{gname}[{i}]"), None),
            Some(e) => {
                let ix = self.expr(code, e);
                (
                    format!("s.{gname}[{ix}]"),
                    Some(format!(
                        "if ({ix} < 0 || {ix} >= {len}) {{ th.status = PC_UNSUPPORTED; return; }}  // index out of range"
                    )),
                )
            }
        }
    }

    /// Flat barrier index expression (for completion counters).
    pub(super) fn flat_bar(&self, code: &Code, r: &Ref) -> String {
        self.flat(code, r, true)
    }

    pub(super) fn flat_buf(&self, code: &Code, r: &Ref) -> String {
        self.flat(code, r, false)
    }

    /// The flat index of a reference; in a remote operation, of the target CTA's copy.
    pub(super) fn flat(&self, code: &Code, r: &Ref, barrier: bool) -> String {
        let (groups, objects) = if barrier {
            (&self.p.barrier_groups, self.p.barriers.len())
        } else {
            (&self.p.buffer_groups, self.p.buffers.len())
        };
        let base = match self.remote {
            Some(rank) => format!(
                "{rank} * {} + {}",
                objects / self.cluster,
                groups[self.local_group(r.group, barrier)].base
            ),
            None => groups[r.group as usize].base.to_string(),
        };
        match &r.index {
            None if self.remote.is_none() => base,
            None => format!("({base})"),
            Some(e) => format!("({base} + {})", self.expr(code, e)),
        }
    }
}
