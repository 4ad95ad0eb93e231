//! Per-state arrays that grow without moving.
//!
//! The store's rows, parents, actions and taint grow by one entry per new state. As `Vec`s they
//! doubled, and each doubling copied the whole array into fresh memory that the kernel first had
//! to zero: on the ring at 1.5 M states that was 0.7 s of page faults in the one thread that
//! enters new states, which no worker can share. Here an array is a list of fixed segments: a
//! segment is allocated once, filled in place and never copied, so each byte is zeroed and
//! written once.

use std::ops::{Index, IndexMut};

/// Groups a segment holds (a power of two, so that an index splits with a shift and a mask).
const SHIFT: u32 = 14;
const GROUPS: usize = 1 << SHIFT;

/// A growing array of groups of `width` elements (width 1: a plain array), in segments of
/// `GROUPS` groups. Group `i` is `segs[i >> SHIFT][(i & (GROUPS - 1)) * width..][..width]`.
pub struct Segmented<T> {
    segs: Vec<Vec<T>>,
    width: usize,
    len: usize,
}

impl<T: Copy> Segmented<T> {
    pub fn new(width: usize) -> Segmented<T> {
        Segmented {
            segs: Vec::new(),
            width,
            len: 0,
        }
    }

    /// Groups held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segment the next group goes into, allocated at its full size the first time.
    fn tail(&mut self) -> &mut Vec<T> {
        if self.len >> SHIFT == self.segs.len() {
            self.segs.push(Vec::with_capacity(GROUPS * self.width.max(1)));
        }
        &mut self.segs[self.len >> SHIFT]
    }

    /// Append one group (`g.len() == width`).
    pub fn push_group(&mut self, g: &[T]) {
        debug_assert_eq!(g.len(), self.width);
        self.tail().extend_from_slice(g);
        self.len += 1;
    }

    /// Group `i`.
    pub fn group(&self, i: usize) -> &[T] {
        let w = self.width;
        let off = (i & (GROUPS - 1)) * w;
        &self.segs[i >> SHIFT][off..off + w]
    }

    /// Bytes of the groups held (what a state costs, as `Vec`'s length would count it).
    pub fn bytes(&self) -> usize {
        self.len * self.width * std::mem::size_of::<T>()
    }

    /// Bytes newly allocated if `more` groups were added: the segments they would open.
    pub fn growth(&self, more: usize) -> usize {
        let need = (self.len + more).div_ceil(GROUPS);
        need.saturating_sub(self.segs.len()) * GROUPS * self.width.max(1) * std::mem::size_of::<T>()
    }
}

impl<T: Copy> Segmented<T> {
    /// A plain array (groups of one).
    pub fn plain() -> Segmented<T> {
        Segmented::new(1)
    }

    /// Append one element to a plain array.
    pub fn push(&mut self, x: T) {
        debug_assert_eq!(self.width, 1);
        self.tail().push(x);
        self.len += 1;
    }
}

/// Element `i` of a plain array.
impl<T: Copy> Index<usize> for Segmented<T> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        debug_assert_eq!(self.width, 1);
        &self.segs[i >> SHIFT][i & (GROUPS - 1)]
    }
}

impl<T: Copy> IndexMut<usize> for Segmented<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert_eq!(self.width, 1);
        &mut self.segs[i >> SHIFT][i & (GROUPS - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_read_back_across_segments() {
        let mut s: Segmented<u32> = Segmented::new(3);
        let n = 2 * GROUPS + 5;
        for i in 0..n as u32 {
            s.push_group(&[i, i + 1, i * 7]);
        }
        assert_eq!(s.len(), n);
        for i in [0, 1, GROUPS - 1, GROUPS, 2 * GROUPS + 4] {
            let x = i as u32;
            assert_eq!(s.group(i), &[x, x + 1, x * 7]);
        }
        assert_eq!(s.bytes(), n * 3 * 4);
    }

    #[test]
    fn a_plain_array_indexes_and_counts_its_growth_by_segment() {
        let mut p: Segmented<u8> = Segmented::plain();
        assert_eq!(p.growth(1), GROUPS);
        for i in 0..GROUPS + 1 {
            p.push(i as u8);
        }
        p[GROUPS] |= 0x80;
        assert_eq!(p[GROUPS], 0x80);
        assert_eq!(p[7], 7);
        assert_eq!(p.growth(GROUPS - 1), 0);
        assert_eq!(p.growth(GROUPS), GROUPS);
        assert_eq!(p.bytes(), GROUPS + 1);
    }
}
