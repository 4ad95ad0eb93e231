//! Integer semantics of PTX types and instruction names: the width and signedness an
//! instruction computes in, wrapping to it, and an opcode's family.

use crate::ptx::{type_bytes, Instr};

pub fn ty_of(ins: &Instr) -> (u32, bool) {
    // The first type suffix: what the destination is.
    for p in ins.parts().iter().skip(1) {
        let s = format!(".{p}");
        if *p == "pred" {
            return (1, false);
        }
        if let Some(b) = type_bytes(&s) {
            return ((b * 8) as u32, p.starts_with('s'));
        }
    }
    (64, false)
}

pub fn norm(v: i64, bits: u32, signed: bool) -> i64 {
    match (bits, signed) {
        (1, _) => (v != 0) as i64,
        (8, false) => v as u8 as i64,
        (8, true) => v as i8 as i64,
        (16, false) => v as u16 as i64,
        (16, true) => v as i16 as i64,
        (32, false) => v as u32 as i64,
        (32, true) => v as i32 as i64,
        _ => v,
    }
}

/// The innermost `mbarrier.*` / `cp.async.*` family a fact is filed under.
pub fn family(op: &str) -> String {
    let p: Vec<&str> = op.split('.').collect();
    p.iter().take(2).copied().collect::<Vec<_>>().join(".")
}

pub fn vec_len(ins: &Instr) -> i64 {
    for p in ins.parts() {
        if let Some(n) = p.strip_prefix('v') {
            if let Ok(n) = n.parse::<i64>() {
                return n;
            }
        }
    }
    1
}

/// The lane a `shfl.sync.MODE` reads in lane `lane`, from its `b` (lane or offset) and `c`
/// (clamp and segment mask) operands, as the PTX ISA defines it; `None` for an unknown mode.
pub fn shfl_source(mode: &str, lane: i64, b: i64, c: i64) -> Option<i64> {
    let (bv, cv, sm) = (b & 31, c & 31, (c >> 8) & 31);
    let max_lane = (lane & sm) | (cv & !sm);
    let min_lane = lane & sm;
    let (j, ok) = match mode {
        "up" => (lane - bv, lane - bv >= max_lane),
        "down" => (lane + bv, lane + bv <= max_lane),
        "bfly" => (lane ^ bv, (lane ^ bv) <= max_lane),
        "idx" => (min_lane | (bv & !sm), (min_lane | (bv & !sm)) <= max_lane),
        _ => return None,
    };
    Some(if ok { j } else { lane })
}

#[cfg(test)]
mod tests {
    #[test]
    fn shuffles_read_the_lanes_the_isa_names() {
        // __shfl_sync(~0, x, 0): every lane reads lane 0
        assert_eq!(super::shfl_source("idx", 7, 0, 0x1f), Some(0));
        // __shfl_down_sync(~0, x, 1): lane 7 reads 8; lane 31 has no lane 32 and reads itself
        assert_eq!(super::shfl_source("down", 7, 1, 0x1f), Some(8));
        assert_eq!(super::shfl_source("down", 31, 1, 0x1f), Some(31));
        // __shfl_up_sync(~0, x, 1) (c = 0): lane 0 reads itself
        assert_eq!(super::shfl_source("up", 0, 1, 0), Some(0));
        assert_eq!(super::shfl_source("bfly", 6, 1, 0x1f), Some(7));
        assert_eq!(super::shfl_source("sum", 6, 1, 0x1f), None);
    }
}
