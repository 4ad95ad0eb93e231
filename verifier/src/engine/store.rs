//! Exact, compact storage of visited states.
//!
//! A state is packed by the model into a fixed number of components (a thread's record, a
//! barrier's record, ...). Each distinct component is stored once in the [`Interner`], and a state
//! is the short vector of its components' ids, stored once in the [`StateSet`]. Most successors
//! differ from their parent in one or two components, so the interner grows slowly and a stored
//! state costs four bytes per component plus its table slot.
//!
//! The interner keeps each component's words as variable-length bytes (seven bits a byte): a
//! component's words are mostly small (program counters, counts, versions), so a record of 14 words
//! takes about 16 bytes instead of 56. This is what keeps the bytes per state flat in depth: the
//! interner's share is the part that depends on how many new records each level brings.
//!
//! Storage is exact (no fingerprints): a state is never confused with another, so no verdict
//! carries an omission probability.

use super::pool::Pool;
use super::segments::Segmented;
use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::Hasher;
use std::sync::Mutex;

/// The hash the interner and the state table file their entries under: computed by the
/// expansion workers, in parallel, so that the one thread that enters a chunk's successors into
/// the store does not compute it again.
pub fn hash_words(w: impl IntoIterator<Item = u32>) -> u64 {
    let mut h = FxHasher::default();
    for x in w {
        h.write_u32(x);
    }
    h.finish()
}

/// Append `x` in LEB128 form (seven bits a byte, high bit set on all but the last).
fn put_varint(out: &mut Vec<u8>, mut x: u32) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// The words of an encoded record.
fn varints(mut b: &[u8]) -> impl Iterator<Item = u32> + '_ {
    std::iter::from_fn(move || {
        let (mut x, mut shift) = (0u32, 0);
        loop {
            let (&byte, rest) = b.split_first()?;
            b = rest;
            x |= ((byte & 0x7f) as u32) << shift;
            if byte < 0x80 {
                return Some(x);
            }
            shift += 7;
        }
    })
}

/// Whether an encoded record holds exactly the words `w`.
fn same_words(b: &[u8], w: &[u32]) -> bool {
    let mut it = varints(b);
    w.iter().all(|&x| it.next() == Some(x)) && it.next().is_none()
}

/// Bytes a vector allocates to take `more` elements beyond its length, if that makes it grow (the
/// old block stays until the copy is done, so this is on top of what it holds now).
pub fn vec_growth<T>(v: &Vec<T>, more: usize) -> usize {
    if v.len() + more <= v.capacity() {
        0
    } else {
        (v.capacity() * 2).max(v.len() + more) * std::mem::size_of::<T>()
    }
}

/// The same for a table of `u32` slots: it doubles its buckets (7/8 of them usable), each a slot
/// and a control byte.
fn table_growth(t: &HashTable<u32>, more: usize) -> usize {
    if t.len() + more <= t.capacity() {
        0
    } else {
        let buckets = ((t.len() + more) * 8 / 7).next_power_of_two().max(2 * t.capacity() * 8 / 7);
        buckets * (std::mem::size_of::<u32>() + 1)
    }
}

/// Distinct word sequences, each named by a dense id.
#[derive(Default)]
pub struct Interner {
    /// Every record's words, encoded (`put_varint`).
    bytes: Vec<u8>,
    /// `starts[id]..starts[id + 1]` are the bytes of `id`.
    starts: Vec<usize>,
    table: HashTable<u32>,
}

impl Interner {
    pub fn new() -> Interner {
        Interner {
            bytes: Vec::new(),
            starts: vec![0],
            table: HashTable::new(),
        }
    }

    fn encoded(&self, id: u32) -> &[u8] {
        &self.bytes[self.starts[id as usize]..self.starts[id as usize + 1]]
    }

    /// Append the words of `id` to `out`.
    pub fn get_into(&self, id: u32, out: &mut Vec<u32>) {
        out.extend(varints(self.encoded(id)));
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of `w`, without adding it.
    pub fn find(&self, w: &[u32]) -> Option<u32> {
        self.find_hashed(w, hash_words(w.iter().copied()))
    }

    /// `find`, with `h = hash_words(w)` already computed.
    pub fn find_hashed(&self, w: &[u32], h: u64) -> Option<u32> {
        self.table.find(h, |&id| same_words(self.encoded(id), w)).copied()
    }

    pub fn intern(&mut self, w: &[u32]) -> u32 {
        self.intern_hashed(w, hash_words(w.iter().copied()))
    }

    /// `intern`, with `h = hash_words(w)` already computed.
    pub fn intern_hashed(&mut self, w: &[u32], h: u64) -> u32 {
        let Interner { bytes, starts, table } = self;
        let encoded = |id: u32| &bytes[starts[id as usize]..starts[id as usize + 1]];
        if let Some(&id) = table.find(h, |&id| same_words(encoded(id), w)) {
            return id;
        }
        let id = (starts.len() - 1) as u32;
        for &x in w {
            put_varint(bytes, x);
        }
        starts.push(bytes.len());
        let (bytes, starts) = (&*bytes, &*starts);
        table.insert_unique(h, id, |&id| {
            hash_words(varints(&bytes[starts[id as usize]..starts[id as usize + 1]]))
        });
        id
    }

    /// Keep the first `n` records.
    fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        self.bytes.truncate(self.starts[n]);
        self.starts.truncate(n + 1);
        self.table.retain(|id| (*id as usize) < n);
    }

    /// Bytes of the records and their table entries (a slot and its control byte), not of
    /// spare capacity: what the components cost, independent of where the vectors last grew.
    pub fn bytes(&self) -> usize {
        self.bytes.len() + self.starts.len() * std::mem::size_of::<usize>() + self.table.len() * 5
    }

    /// Bytes newly allocated if `more` components of the average size so far were added.
    pub fn growth(&self, more: usize) -> usize {
        let bytes_each = self.bytes.len().div_ceil(self.len().max(1));
        vec_growth(&self.bytes, more * bytes_each) + vec_growth(&self.starts, more) + table_growth(&self.table, more)
    }
}

/// Bits of a component id that name its shard (`Components`).
const SHARD_BITS: u32 = 6;
/// Shards of the component store: enough that the workers of a 16-thread search each own
/// several, so the interning of a chunk's new components spreads evenly over them.
pub const SHARDS: usize = 1 << SHARD_BITS;

/// The distinct components, in shards by hash, so that the workers of a parallel search intern a
/// chunk's new components at once, each into the shards it owns (`bfs.rs`). A component's id is
/// its index in its shard, then the shard: each shard hands out its indices in the order its
/// components are first interned, which the search keeps to frontier order, so the ids do not
/// depend on the thread count.
pub struct Components {
    shards: Vec<Interner>,
}

impl Default for Components {
    fn default() -> Self {
        Components {
            shards: (0..SHARDS).map(|_| Interner::new()).collect(),
        }
    }
}

impl Components {
    /// The shard of a component with hash `h`: bits the tables' own bucket index and control
    /// byte do not use (the low bits and the top seven), so each shard's table stays uniform.
    pub fn shard_of(h: u64) -> usize {
        ((h >> 40) as usize) & (SHARDS - 1)
    }

    /// The shard of `id`, and its index in that shard.
    pub fn split(id: u32) -> (usize, u32) {
        ((id as usize) & (SHARDS - 1), id >> SHARD_BITS)
    }

    fn join(shard: usize, local: u32) -> u32 {
        assert!(local < 1 << (32 - SHARD_BITS), "more than 2^26 components in one shard");
        (local << SHARD_BITS) | shard as u32
    }

    /// Append the words of `id` to `out`.
    pub fn get_into(&self, id: u32, out: &mut Vec<u32>) {
        let (shard, local) = Self::split(id);
        self.shards[shard].get_into(local, out);
    }

    /// The id of `w` (with `h = hash_words(w)`), without adding it.
    pub fn find_hashed(&self, w: &[u32], h: u64) -> Option<u32> {
        let shard = Self::shard_of(h);
        self.shards[shard].find_hashed(w, h).map(|local| Self::join(shard, local))
    }

    pub fn intern(&mut self, w: &[u32]) -> u32 {
        self.intern_hashed(w, hash_words(w.iter().copied()))
    }

    /// The id of `w`, added if new (`h = hash_words(w)`).
    pub fn intern_hashed(&mut self, w: &[u32], h: u64) -> u32 {
        let shard = Self::shard_of(h);
        Self::join(shard, self.shards[shard].intern_hashed(w, h))
    }

    /// Every shard, each with its index, to be handed to the workers that own them.
    pub fn shards_mut(&mut self) -> impl Iterator<Item = ShardMut<'_>> {
        self.shards
            .iter_mut()
            .enumerate()
            .map(|(index, interner)| ShardMut { index, interner })
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(Interner::len).sum()
    }

    /// How many components each shard holds.
    pub fn shard_lens(&self) -> Vec<usize> {
        self.shards.iter().map(Interner::len).collect()
    }

    /// Keep the first `keep[s]` components of each shard `s` (the rest no stored state uses).
    pub fn truncate_shards(&mut self, keep: &[usize]) {
        for (shard, &n) in self.shards.iter_mut().zip(keep) {
            shard.truncate(n);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the components cost (`Interner::bytes`), with the shards' leading empty offsets
    /// counted once: one store has one, so the figure does not depend on how it is sharded.
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(Interner::bytes).sum::<usize>() - (SHARDS - 1) * std::mem::size_of::<usize>()
    }

    /// Bytes newly allocated if `more` components were added, spread evenly over the shards.
    pub fn growth(&self, more: usize) -> usize {
        let each = more.div_ceil(SHARDS);
        self.shards.iter().map(|s| s.growth(each)).sum()
    }
}

/// One shard of the component store, owned by one worker while a chunk's components are interned.
pub struct ShardMut<'a> {
    pub index: usize,
    interner: &'a mut Interner,
}

impl ShardMut<'_> {
    /// The id of `w`, added if new (`h = hash_words(w)`, whose shard is this one).
    pub fn intern_hashed(&mut self, w: &[u32], h: u64) -> u32 {
        debug_assert_eq!(Components::shard_of(h), self.index);
        Components::join(self.index, self.interner.intern_hashed(w, h))
    }
}

/// Visited states as fixed-width rows of component ids, each row stored once. The rows are
/// numbered in the order they are added (the search's frontier order); the tables that find a row
/// are in shards by hash, like the components', so that the workers of a parallel search file a
/// chunk's new states at once, each into the shards it owns (`append` then `file`).
pub struct StateSet {
    rows: Segmented<u32>,
    tables: Vec<HashTable<u32>>,
}

impl StateSet {
    pub fn new(width: usize) -> StateSet {
        StateSet {
            rows: Segmented::new(width),
            tables: (0..SHARDS).map(|_| HashTable::new()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn row(&self, i: u32) -> &[u32] {
        self.rows.group(i as usize)
    }

    pub fn find(&self, row: &[u32]) -> Option<u32> {
        self.find_hashed(row, hash_words(row.iter().copied()))
    }

    /// `find`, with `h = hash_words(row)` already computed.
    pub fn find_hashed(&self, row: &[u32], h: u64) -> Option<u32> {
        self.tables[Components::shard_of(h)].find(h, |&i| self.row(i) == row).copied()
    }

    /// The index of `row`, and whether it was new.
    pub fn insert(&mut self, row: &[u32]) -> (u32, bool) {
        self.insert_hashed(row, hash_words(row.iter().copied()))
    }

    /// `insert`, with `h = hash_words(row)` already computed.
    pub fn insert_hashed(&mut self, row: &[u32], h: u64) -> (u32, bool) {
        if let Some(i) = self.find_hashed(row, h) {
            return (i, false);
        }
        let i = self.append(row);
        let StateSet { rows, tables, .. } = self;
        file_row(&mut tables[Components::shard_of(h)], rows, h, i);
        (i, true)
    }

    /// Add a row known to be new, without filing it: it is found once `file` has filed it.
    pub fn append(&mut self, row: &[u32]) -> u32 {
        let i = self.len() as u32;
        self.rows.push_group(row);
        i
    }

    /// File appended rows, given as (hash, index), in parallel: each worker of `pool` files
    /// those of the shards it owns (in the order given, so a shard's table is the same whatever
    /// the thread count).
    pub fn file(&mut self, new: &[(u64, u32)], pool: &Pool) {
        if new.is_empty() {
            return;
        }
        let threads = pool.threads();
        let StateSet { rows, tables, .. } = self;
        let rows = &*rows;
        let mut owned: Vec<Vec<(usize, &mut HashTable<u32>)>> = (0..threads).map(|_| Vec::new()).collect();
        for (k, t) in tables.iter_mut().enumerate() {
            owned[k % threads].push((k, t));
        }
        let owned: Vec<Mutex<Vec<(usize, &mut HashTable<u32>)>>> = owned.into_iter().map(Mutex::new).collect();
        pool.run(&|w| {
            let mut mine = owned[w].lock().unwrap_or_else(|e| e.into_inner());
            let mut slot = [usize::MAX; SHARDS];
            for (j, (k, _)) in mine.iter().enumerate() {
                slot[*k] = j;
            }
            for &(h, i) in new {
                let j = slot[Components::shard_of(h)];
                if j != usize::MAX {
                    file_row(mine[j].1, rows, h, i);
                }
            }
        });
    }

    /// Bytes of the rows and their table entries (see `Interner::bytes`).
    pub fn bytes(&self) -> usize {
        self.rows.bytes() + self.tables.iter().map(|t| t.len() * 5).sum::<usize>()
    }

    /// Bytes newly allocated if `more` rows were added, spread evenly over the shards.
    pub fn growth(&self, more: usize) -> usize {
        let each = more.div_ceil(SHARDS);
        self.rows.growth(more) + self.tables.iter().map(|t| table_growth(t, each)).sum::<usize>()
    }
}

/// File row `i` (hash `h`) in `table`, whose growth rehashes its rows from `rows`.
fn file_row(table: &mut HashTable<u32>, rows: &Segmented<u32>, h: u64, i: u32) {
    table.insert_unique(h, i, |&i| hash_words(rows.group(i as usize).iter().copied()));
}
