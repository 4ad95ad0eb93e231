//! The language's integer semantics, stated once against an independent reference: every
//! operator on 64-bit values computed exactly in 128 bits, a result outside `i64` an overflow,
//! `/` and `%` truncating toward zero (as C++ does, so the generated CUDA agrees), a zero divisor
//! or a quotient outside `i64` a fault, comparisons and logic 0 or 1. The model's evaluator, the constant folder and the
//! reference runtime all call `apply_binary`/`apply_unary`, so a wrong operator would change
//! every one of them together, and no verdict comparison between them could see it.

use phasecheck_model::lang::ast::{BinOp, UnOp};
use phasecheck_model::program::eval::{apply_binary, apply_unary};
use proptest::prelude::*;

/// `None`: a fault (overflow, or a zero divisor).
fn reference(op: BinOp, a: i64, b: i64) -> Option<i64> {
    let (x, y) = (a as i128, b as i128);
    let exact = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div | BinOp::Rem if y == 0 => return None,
        // Truncation toward zero: the quotient's magnitude is |x| / |y| rounded down.
        BinOp::Div => {
            let q = x.abs() / y.abs();
            if (x < 0) != (y < 0) {
                -q
            } else {
                q
            }
        }
        // The remainder faults where the quotient does (`i64::MIN % -1`: undefined in C++).
        BinOp::Rem => {
            let q = x.abs() / y.abs();
            let q = if (x < 0) != (y < 0) { -q } else { q };
            i64::try_from(q).ok()?;
            x - q * y
        }
        BinOp::Eq => (x == y) as i128,
        BinOp::Ne => (x != y) as i128,
        BinOp::Lt => (x < y) as i128,
        BinOp::Le => (x <= y) as i128,
        BinOp::Gt => (x > y) as i128,
        BinOp::Ge => (x >= y) as i128,
        BinOp::And => (x != 0 && y != 0) as i128,
        BinOp::Or => (x != 0 || y != 0) as i128,
    };
    i64::try_from(exact).ok()
}

fn edge() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(0i64),
        Just(1),
        Just(-1),
        Just(2),
        Just(-2),
        Just(i64::MAX),
        Just(i64::MIN),
        Just(i64::MAX - 1),
        Just(i64::MIN + 1),
        -8i64..8,
        any::<i64>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn every_binary_operator_is_exact_64_bit_arithmetic_with_faults(op in prop::sample::select(BinOp::ALL.to_vec()), a in edge(), b in edge()) {
        prop_assert_eq!(apply_binary(op, a, b).ok(), reference(op, a, b), "{:?} {} {}", op, a, b);
    }

    #[test]
    fn negation_faults_only_at_the_minimum_and_not_is_logical(a in edge()) {
        prop_assert_eq!(apply_unary(UnOp::Neg, a), i64::try_from(-(a as i128)).ok());
        prop_assert_eq!(apply_unary(UnOp::Not, a), Some((a == 0) as i64));
    }
}

/// The boundary cases by name, so that a failure reads as a rule.
#[test]
fn comparisons_are_strict_or_not_exactly_at_equality() {
    for (op, lt, eq, gt) in [
        (BinOp::Lt, 1, 0, 0),
        (BinOp::Le, 1, 1, 0),
        (BinOp::Gt, 0, 0, 1),
        (BinOp::Ge, 0, 1, 1),
        (BinOp::Eq, 0, 1, 0),
        (BinOp::Ne, 1, 0, 1),
    ] {
        assert_eq!(apply_binary(op, 3, 4), Ok(lt), "{op:?} 3 4");
        assert_eq!(apply_binary(op, 4, 4), Ok(eq), "{op:?} 4 4");
        assert_eq!(apply_binary(op, 5, 4), Ok(gt), "{op:?} 5 4");
    }
    assert_eq!(apply_binary(BinOp::Div, -7, 2), Ok(-3), "truncates toward zero");
    assert_eq!(apply_binary(BinOp::Rem, -7, 2), Ok(-1), "takes the dividend's sign");
    assert_eq!(apply_binary(BinOp::Div, i64::MIN, -1), Err("arithmetic overflow"));
    assert_eq!(apply_binary(BinOp::Div, 1, 0), Err("division by zero"));
    assert_eq!(apply_binary(BinOp::Rem, 1, 0), Err("remainder by zero"));
    assert_eq!(apply_binary(BinOp::And, 2, -3), Ok(1), "any non-zero is true");
    assert_eq!(apply_binary(BinOp::Or, 0, 0), Ok(0));
}
