//! The Blackwell statements' arguments (lang::blackwell), once `Parser::op` has checked them
//! against their signatures.

use super::ops::Arg;
use super::*;
use crate::lang::blackwell::TcStmt;

/// Build the statement `kw` from its positional and named arguments (already checked against
/// `signature(kw)`: the places and expressions sit where the signature puts them).
pub(super) fn stmt(kw: &str, pos: Vec<Arg>, named: Vec<(String, Expr, Span)>) -> TcStmt {
    let mut places = Vec::new();
    let mut exprs = Vec::new();
    for a in pos {
        match a {
            Arg::Place(p) => places.push(p),
            Arg::Expr(e) => exprs.push(e),
        }
    }
    let mut named = named;
    let mut take = |n: &str| named.iter().position(|(m, _, _)| m == n).map(|i| named.remove(i).1);
    let mut places = places.into_iter();
    let mut place = || places.next().expect("a required place was counted by the signature");
    match kw {
        "tcgen05_mma" => {
            let acc = place();
            let mut bufs = Vec::new();
            while let Some(p) = places.next() {
                bufs.push(p);
            }
            TcStmt::Mma {
                acc,
                bufs,
                expect: take("expect"),
                version: take("version"),
            }
        }
        "tcgen05_commit" => TcStmt::Commit {
            bar: place(),
            multicast: take("multicast"),
        },
        "tmem_alloc" => TcStmt::Alloc {
            tmem: place(),
            cols: exprs.remove(0),
        },
        "tmem_dealloc" => TcStmt::Dealloc { tmem: place() },
        "tmem_relinquish" => TcStmt::Relinquish,
        "tcgen05_ld" => TcStmt::Ld {
            tmem: place(),
            expect: take("expect"),
        },
        "tcgen05_wait_ld" => TcStmt::WaitLd,
        "clc_try_cancel" => {
            let resp = place();
            TcStmt::ClcTryCancel { resp, bar: place() }
        }
        _ => unreachable!("every Blackwell word has a case"),
    }
}
