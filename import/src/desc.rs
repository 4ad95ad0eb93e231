//! Shared-memory addresses as numbers, and the operand a `wgmma.mma_async` reads.
//!
//! Most code moves shared addresses by adding to them, which the value analysis follows as
//! symbol + offset. Some code takes their bits apart: a wgmma matrix descriptor is a 64-bit
//! value whose bits 0..14 are the start address shifted right by 4, and kernels round dynamic
//! shared memory up to 1024 bytes with masks. For those the address needs a number, so every
//! shared symbol gets one here, laid out as the compiler would (the static symbols in order, each
//! at its alignment; the dynamic `.extern` ones after them, all at one address). The layout is an
//! assumption, and every value computed from it is reported as such.

use crate::exec::Val;
use crate::ptx::Module;

pub enum Operand {
    /// A descriptor naming this shared symbol (at this byte offset).
    Shared(String, i64),
    /// The A operand in registers: no shared-memory read.
    Registers,
}

/// Where each shared symbol lies (name, first byte, bytes; `None` for dynamic shared memory).
pub struct Layout {
    symbols: Vec<(String, i64, Option<i64>)>,
}

fn align_up(x: i64, a: i64) -> i64 {
    (x + a - 1) / a * a
}

impl Layout {
    pub fn new(m: &Module) -> Layout {
        let mut symbols = Vec::new();
        let mut at = 0i64;
        for v in m.shared.iter().filter(|v| v.bytes.is_some()) {
            at = align_up(at, v.align.max(1) as i64);
            let n = v.bytes.unwrap_or(0) as i64;
            symbols.push((v.name.clone(), at, Some(n)));
            at += n;
        }
        let dynamic: Vec<_> = m.shared.iter().filter(|v| v.bytes.is_none()).collect();
        let align = dynamic.iter().map(|v| v.align.max(16) as i64).max().unwrap_or(16);
        let base = align_up(at, align);
        for v in dynamic {
            symbols.push((v.name.clone(), base, None));
        }
        Layout { symbols }
    }

    /// The number the address `sym + off` is under this layout.
    pub fn address(&self, sym: &str, off: i64) -> Option<i64> {
        self.symbols.iter().find(|s| s.0 == sym).map(|s| s.1 + off)
    }

    /// The symbol + offset a numeric shared address falls in (dynamic shared memory takes
    /// everything from its base on).
    pub fn symbol(&self, addr: i64) -> Option<(String, i64)> {
        self.symbols.iter().find_map(|(name, base, size)| {
            let inside = addr >= *base && size.is_none_or(|n| addr < base + n.max(1));
            inside.then(|| (name.clone(), addr - base))
        })
    }
}

/// The buffer a wgmma operand names, or `None` when the importer cannot tell: a descriptor's
/// bits 0..14 are its start address divided by 16.
pub fn operand_buffer(layout: &Layout, v: &Val) -> Option<Operand> {
    match v {
        Val::Sh(s, k) => Some(Operand::Shared(s.clone(), *k)),
        Val::Int(d) => {
            let addr = (d & 0x3fff) << 4;
            layout.symbol(addr).map(|(s, k)| Operand::Shared(s, k))
        }
        _ => None,
    }
}
