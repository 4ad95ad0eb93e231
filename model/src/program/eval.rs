//! The one evaluator of the language's integer expressions: the arithmetic (`apply_unary`,
//! `apply_binary`: checked 64-bit, C-style truncating `/` and `%`) and the walk that applies it
//! (`eval`: operands left to right, `&&`/`||` short-circuiting or not). A thread's expressions
//! (`IExpr::eval`), declarations' constant expressions (`lower::const_eval`), the constant folder
//! (`IExpr::folded`) and the reference runtime all come here, so they cannot disagree on a value
//! or a fault.

use crate::lang::ast::{BinOp, UnOp};

/// How `&&` and `||` treat their right operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logic {
    /// Skipped when the left one decides: a guard protects its right side (thread code).
    ShortCircuit,
    /// Always evaluated: a fault on either side is the expression's (declarations, folding).
    Strict,
}

/// One node of an expression, as the walk sees it.
pub enum Node<'a, X> {
    /// A leaf with its value (a literal, a local, a shared var, a parameter, an identity).
    Value(i64),
    Unary(UnOp, &'a X),
    Binary(BinOp, &'a X, &'a X),
}

/// Evaluate `x`. `node` says what each node is, reading its leaves (its error ends the walk);
/// `fault` turns an arithmetic fault at a node into the caller's error.
#[inline]
pub fn eval<'a, X, E, N, F>(x: &'a X, logic: Logic, node: &mut N, fault: &F) -> Result<i64, E>
where
    N: FnMut(&'a X) -> Result<Node<'a, X>, E>,
    F: Fn(&'a X, &'static str) -> E,
{
    match node(x)? {
        Node::Value(v) => Ok(v),
        Node::Unary(op, a) => {
            let a = eval(a, logic, node, fault)?;
            apply_unary(op, a).ok_or_else(|| fault(x, "arithmetic overflow"))
        }
        Node::Binary(op, a, b) => {
            let a = eval(a, logic, node, fault)?;
            if logic == Logic::ShortCircuit {
                match op {
                    BinOp::And if a == 0 => return Ok(0),
                    BinOp::Or if a != 0 => return Ok(1),
                    _ => {}
                }
            }
            let b = eval(b, logic, node, fault)?;
            apply_binary(op, a, b).map_err(|m| fault(x, m))
        }
    }
}

pub fn apply_unary(op: UnOp, a: i64) -> Option<i64> {
    match op {
        UnOp::Neg => a.checked_neg(),
        UnOp::Not => Some((a == 0) as i64),
    }
}

/// Integer semantics of the language: checked 64-bit arithmetic, C-style truncating `/` and `%`,
/// comparisons and logic yield 0 or 1.
pub fn apply_binary(op: BinOp, a: i64, b: i64) -> Result<i64, &'static str> {
    let over = "arithmetic overflow";
    Ok(match op {
        BinOp::Add => a.checked_add(b).ok_or(over)?,
        BinOp::Sub => a.checked_sub(b).ok_or(over)?,
        BinOp::Mul => a.checked_mul(b).ok_or(over)?,
        BinOp::Div => {
            if b == 0 {
                return Err("division by zero");
            }
            a.checked_div(b).ok_or(over)?
        }
        BinOp::Rem => {
            if b == 0 {
                return Err("remainder by zero");
            }
            a.checked_rem(b).ok_or(over)?
        }
        BinOp::Eq => (a == b) as i64,
        BinOp::Ne => (a != b) as i64,
        BinOp::Lt => (a < b) as i64,
        BinOp::Le => (a <= b) as i64,
        BinOp::Gt => (a > b) as i64,
        BinOp::Ge => (a >= b) as i64,
        BinOp::And => (a != 0 && b != 0) as i64,
        BinOp::Or => (a != 0 || b != 0) as i64,
    })
}
