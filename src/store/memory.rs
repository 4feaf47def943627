//! The in-memory store: one algorithm state per id, in a hash map that sweeps itself.
//!
//! Idle entries (those whose state no longer affects any answer) are removed in a sweep that runs
//! whenever the map has doubled since the last one, so the work per call stays constant on
//! average and the map holds at most about twice the ids active within one window.
//!
//! With a `max_keys` bound, a map that reaches it is swept, and if that is not enough, the least
//! recently used eighth of the entries is evicted (found in one pass, so the cost per call stays
//! constant on average). An evicted id starts afresh: its limit is forgotten, which is the price
//! of the bound.
//!
//! An id is kept as its [`Key`], a 128-bit SipHash-1-3 of it under a secret drawn per store, not
//! as its text: 16 bytes per id inline in the table whatever the id's length, no allocation per
//! id, and one hash per call. Two ids share state only if their keys collide: with a secret key
//! nobody can aim for that, and by chance it takes about 2^64 ids to expect one collision.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

use siphasher::sip128::{Hasher128, SipHasher13};

use crate::time::{Micros, CLOCK_SKEW};

/// An id as the store keeps it (see the module's documentation); [`MemoryStore::key`] makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(u64, u64);

impl Hash for Key {
    /// Half the key is already a uniform hash: the table takes it as is.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

/// The table's hasher: the [`Key`]'s own bits.
#[derive(Default)]
struct KeyBits(u64);

impl Hasher for KeyBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `Key` is hashed, through `write_u64`; fold anything else in all the same.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, bits: u64) {
        self.0 = bits;
    }
}

/// What the store's methods take to name an id: its text, or its [`Key`] already made (a call
/// that reads and writes the same id hashes it once).
pub trait IdRef {
    fn key_in(self, secret: &SipHasher13) -> Key;
}

impl IdRef for &str {
    fn key_in(self, secret: &SipHasher13) -> Key {
        let mut hasher = *secret;
        hasher.write(self.as_bytes());
        let hash = hasher.finish128();
        Key(hash.h1, hash.h2)
    }
}

impl IdRef for Key {
    fn key_in(self, _secret: &SipHasher13) -> Key {
        self
    }
}

/// A SipHash-1-3 keyed with 128 fresh random bits (drawn from the standard library's per-process
/// random hash keys).
fn secret_hasher() -> SipHasher13 {
    let random = RandomState::new();
    SipHasher13::new_with_keys(random.hash_one(0u8), random.hash_one(1u8))
}

/// How often (by the clock of the calls) a map of at least [`MIN_SWEEP_SIZE`] entries is swept
/// even if it has not grown: 10 s.
const SWEEP_PERIOD: Micros = 10_000_000;

/// The fewest entries at which a sweep runs.
const MIN_SWEEP_SIZE: usize = 1024;

/// The fewest entries a quiet sweep drops before it asks the allocator to return freed memory.
const MIN_TRIM_ENTRIES: usize = 10_000;

/// Asks the allocator to return the memory it holds free to the system. glibc's `malloc` keeps
/// the small blocks of dropped states (a rolling window's log, a bucket circle) for reuse, so a
/// process would otherwise keep the size of its largest burst; `malloc_trim` releases whole free
/// pages. (Elsewhere the allocator's own policy applies.)
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim only walks glibc's own arenas; it takes no pointer of ours.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Per-id state of one limiter, kept in this process.
#[derive(Debug)]
pub struct MemoryStore<S> {
    entries: HashMap<Key, Slot<S>, BuildHasherDefault<KeyBits>>,
    /// Hashes ids into keys.
    secret: SipHasher13,
    /// The map size at which the next sweep runs.
    sweep_at: usize,
    /// The latest instant seen, so that a sweep judges idleness by the newest clock reading.
    latest: Micros,
    /// `latest` at the last sweep.
    swept_at: Micros,
    /// The most entries kept, if bounded.
    max_keys: Option<usize>,
    /// Counts uses, to order entries by their last use.
    uses: u64,
    /// Entries evicted to stay within `max_keys`.
    evicted: u64,
    /// `uses` at the last [`MemoryStore::sweep_if_quiet`], and how many of its periods in a row
    /// saw no call.
    uses_at_check: u64,
    quiet_periods: u32,
}

#[derive(Debug)]
struct Slot<S> {
    state: S,
    /// The value of `uses` at the entry's last use.
    used: u64,
}

impl<S> Default for MemoryStore<S> {
    fn default() -> Self {
        Self::new(None)
    }
}

impl<S: Default> MemoryStore<S> {
    /// The state of `id` (a fresh one when it has none), for a call at `now`.
    ///
    /// `is_idle(state, now)` tells whether a state can be dropped: it is asked of every entry
    /// during a sweep.
    pub fn entry(
        &mut self,
        id: impl IdRef,
        now: Micros,
        is_idle: impl Fn(&S, Micros) -> bool,
    ) -> &mut S {
        let key = self.key(id);
        self.latest = self.latest.max(now);
        self.uses += 1;
        // A burst of ids gone idle is given back even when few new ids come to grow the map.
        if self.entries.len() >= MIN_SWEEP_SIZE
            && self.latest.saturating_sub(self.swept_at) >= SWEEP_PERIOD
        {
            self.sweep(&is_idle);
        }
        // A new id may first need room (a sweep, an eviction): looked up twice only then, once
        // on the common path.
        let full = self.entries.len() >= self.sweep_at
            || self
                .max_keys
                .is_some_and(|max_keys| self.entries.len() >= max_keys);
        if full && !self.entries.contains_key(&key) {
            if self.entries.len() >= self.sweep_at {
                self.sweep(&is_idle);
            }
            if let Some(max_keys) = self.max_keys {
                if self.entries.len() >= max_keys {
                    self.sweep(&is_idle);
                    self.evict_down_to(max_keys - max_keys.div_ceil(8));
                }
            }
        }
        let used = self.uses;
        let slot = self.entries.entry(key).or_insert_with(|| Slot {
            state: S::default(),
            used,
        });
        slot.used = used;
        &mut slot.state
    }
}

impl<S> MemoryStore<S> {
    /// A store of at most `max_keys` ids (unbounded with `None`).
    pub fn new(max_keys: Option<usize>) -> Self {
        Self {
            entries: HashMap::default(),
            secret: secret_hasher(),
            sweep_at: MIN_SWEEP_SIZE,
            latest: Micros::MIN,
            swept_at: Micros::MIN,
            max_keys,
            uses: 0,
            evicted: 0,
            uses_at_check: 0,
            quiet_periods: 0,
        }
    }

    /// The key of `id` in this store: hash an id once for several calls.
    pub fn key(&self, id: impl IdRef) -> Key {
        id.key_in(&self.secret)
    }

    /// The state of `id`, if it has one.
    pub fn get(&self, id: impl IdRef) -> Option<&S> {
        self.entries.get(&self.key(id)).map(|slot| &slot.state)
    }

    /// The state of `id`, if it has one, to change.
    pub fn get_mut(&mut self, id: impl IdRef) -> Option<&mut S> {
        let key = self.key(id);
        self.uses += 1;
        let slot = self.entries.get_mut(&key)?;
        slot.used = self.uses;
        Some(&mut slot.state)
    }

    /// How many ids were evicted to stay within `max_keys`.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Evicts the least recently used entries until at most `keep` remain.
    fn evict_down_to(&mut self, keep: usize) {
        let excess = self.entries.len().saturating_sub(keep);
        if excess == 0 {
            return;
        }
        let mut uses: Vec<u64> = self.entries.values().map(|slot| slot.used).collect();
        // Uses are distinct: the `excess` smallest are exactly those at or below this one.
        let (_, &mut oldest_kept, _) = uses.select_nth_unstable(excess - 1);
        self.entries.retain(|_, slot| slot.used > oldest_kept);
        self.evicted += excess as u64;
        self.shrink();
    }

    /// Forgets `id`.
    pub fn remove(&mut self, id: impl IdRef) {
        let key = self.key(id);
        self.entries.remove(&key);
    }

    /// Every id's state, in no particular order.
    pub fn states(&self) -> impl Iterator<Item = &S> {
        self.entries.values().map(|slot| &slot.state)
    }

    /// How many ids have state.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops idle entries and gives memory back when the map has shrunk a lot.
    ///
    /// Idleness is judged [`CLOCK_SKEW`] before the newest instant seen: a call that far behind
    /// (a host whose clock is behind) still finds the state it would find on Redis, whose keys
    /// outlive their last write by as much.
    pub fn sweep(&mut self, is_idle: impl Fn(&S, Micros) -> bool) {
        self.swept_at = self.latest;
        self.drop_idle_at(self.latest, is_idle);
    }

    /// Drops the entries idle [`CLOCK_SKEW`] before `at`, and shrinks the map; returns how many.
    fn drop_idle_at(&mut self, at: Micros, is_idle: impl Fn(&S, Micros) -> bool) -> usize {
        let before = self.entries.len();
        let latest = at.saturating_sub(CLOCK_SKEW);
        self.entries.retain(|_, slot| !is_idle(&slot.state, latest));
        self.shrink();
        before - self.entries.len()
    }

    /// For a timer that runs every `period`: when no call has used the store since the timer's
    /// last run, sweeps as if the calls' clock had moved on by the periods without a call. A
    /// burst of ids is so given back once it has gone idle even when no call comes at all (a
    /// call's own sweep needs a call).
    pub fn sweep_if_quiet(&mut self, period: Micros, is_idle: impl Fn(&S, Micros) -> bool) {
        if self.uses != self.uses_at_check {
            self.uses_at_check = self.uses;
            self.quiet_periods = 0;
            return;
        }
        self.quiet_periods = self.quiet_periods.saturating_add(1);
        if self.entries.is_empty() {
            return;
        }
        let moved_on = period.saturating_mul(Micros::from(self.quiet_periods));
        if self.drop_idle_at(self.latest.saturating_add(moved_on), is_idle) >= MIN_TRIM_ENTRIES {
            give_back_freed_memory();
        }
    }

    fn shrink(&mut self) {
        if self.entries.capacity() > 4 * self.entries.len().max(MIN_SWEEP_SIZE) {
            self.entries.shrink_to_fit();
        }
        self.sweep_at = (2 * self.entries.len()).max(MIN_SWEEP_SIZE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Micros = 1_000_000;

    /// A state that is idle once `now` passes the instant it holds.
    #[derive(Default)]
    struct Until(Micros);

    fn idle(state: &Until, now: Micros) -> bool {
        now >= state.0
    }

    #[test]
    fn entries_are_created_once_and_kept() {
        let mut store = MemoryStore::<Until>::default();
        store.entry("a", 0, idle).0 = 10;
        assert_eq!(store.entry("a", 5, idle).0, 10);
        assert_eq!(store.len(), 1);
        store.remove("a");
        assert!(store.get("a").is_none());
    }

    #[test]
    fn ids_are_keyed_by_a_secret_hash() {
        let mut store = MemoryStore::<Until>::default();
        let long = "x".repeat(1024);
        store.entry("a", 0, idle).0 = 1;
        store.entry(long.as_str(), 0, idle).0 = 2;
        // A key made once names the same state as the id does.
        let key = store.key("a");
        assert_eq!(store.get(key).map(|s| s.0), Some(1));
        assert_eq!(store.get(long.as_str()).map(|s| s.0), Some(2));
        assert!(store.get("b").is_none() && store.get(&long[1..]).is_none());
        // Each store draws its own secret: nobody can compute which ids collide.
        assert_ne!(MemoryStore::<Until>::default().key("a"), key);
    }

    #[test]
    fn idle_entries_are_swept_as_the_map_grows() {
        let mut store = MemoryStore::<Until>::default();
        // A million ids, each idle as soon as the clock moves on (by more than the skew a late
        // call may have): the map never grows past twice the sweep threshold.
        for i in 0..1_000_000i64 {
            let now = i * CLOCK_SKEW;
            store.entry(i.to_string().as_str(), now, idle).0 = now + 1;
            assert!(store.len() <= 2 * MIN_SWEEP_SIZE);
        }
    }

    #[test]
    fn a_burst_gone_idle_is_given_back_without_new_ids() {
        let mut store = MemoryStore::<Until>::default();
        for i in 0..100_000i64 {
            store.entry(i.to_string().as_str(), 0, idle).0 = 1_000_000;
        }
        let capacity = store.entries.capacity();
        // Then one id, called now and then: within a sweep period of the clock, the map is
        // swept and shrunk though it never grew again.
        for second in 0..=SWEEP_PERIOD / 1_000_000 + 2 {
            store.entry("steady", second * 1_000_000, idle).0 = Micros::MAX;
        }
        assert_eq!(store.len(), 1);
        assert!(
            store.entries.capacity() < capacity / 16,
            "capacity {}",
            store.entries.capacity()
        );
    }

    #[test]
    fn a_burst_gone_idle_is_given_back_when_no_call_comes() {
        let mut store = MemoryStore::<Until>::default();
        for i in 0..5000 {
            store.entry(i.to_string().as_str(), 0, idle).0 = SECOND;
        }
        // The first period saw calls; a period without any sweeps, as if that time had passed.
        store.sweep_if_quiet(SECOND / 2, idle);
        assert_eq!(store.len(), 5000);
        store.sweep_if_quiet(SECOND / 2, idle);
        assert_eq!(
            store.len(),
            5000,
            "idle only after 1 s, not 0.5 s (plus the skew)"
        );
        store.sweep_if_quiet(CLOCK_SKEW, idle);
        assert_eq!(store.len(), 0);
        assert!(store.entries.capacity() < 5000);
    }

    #[test]
    fn a_call_between_two_checks_keeps_the_store_as_it_is() {
        let mut store = MemoryStore::<Until>::default();
        store.entry("a", 0, idle).0 = SECOND;
        store.sweep_if_quiet(10 * SECOND, idle);
        store.entry("b", 0, idle).0 = SECOND;
        store.sweep_if_quiet(10 * SECOND, idle);
        assert_eq!(store.len(), 2);
        store.sweep_if_quiet(10 * SECOND, idle);
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn max_keys_evicts_the_least_recently_used() {
        let mut store = MemoryStore::<Until>::new(Some(100));
        for i in 0..100i64 {
            store.entry(i.to_string().as_str(), 0, idle).0 = Micros::MAX;
        }
        // Id 0 is used again: the least recently used are now 1, 2, ...
        store.entry("0", 0, idle);
        store.entry("new", 0, idle);
        assert_eq!(store.len(), 100 - 13 + 1);
        assert_eq!(store.evicted(), 13);
        assert!(store.get("0").is_some());
        assert!(store.get("new").is_some());
        assert!(store.get("1").is_none() && store.get("13").is_none());
        assert!(store.get("14").is_some());
        // Idle entries go first, before any active one is evicted.
        let mut store = MemoryStore::<Until>::new(Some(10));
        for i in 0..10i64 {
            store.entry(i.to_string().as_str(), 0, idle).0 = if i < 5 { 0 } else { Micros::MAX };
        }
        store.entry("new", CLOCK_SKEW, idle);
        assert_eq!((store.len(), store.evicted()), (6, 0));
    }

    #[test]
    fn a_million_ids_stay_within_max_keys() {
        let mut store = MemoryStore::<Until>::new(Some(100_000));
        for i in 0..1_000_000i64 {
            store.entry(i.to_string().as_str(), 0, idle).0 = Micros::MAX;
            assert!(store.len() <= 100_000);
        }
        assert_eq!(store.evicted() + store.len() as u64, 1_000_000);
    }

    #[test]
    fn a_sweep_keeps_what_a_call_a_little_behind_still_sees() {
        // Regression: sweeps judged idleness at the newest instant seen, so a state idle then
        // was dropped though a call from a host whose clock is behind (by less than the skew
        // every Redis key's TTL allows) still counted it on Redis.
        let mut store = MemoryStore::<Until>::default();
        store.entry("a", 0, idle).0 = 10;
        store.entry("b", CLOCK_SKEW + 9, idle);
        store.sweep(idle);
        assert!(store.get("a").is_some());
        store.entry("c", CLOCK_SKEW + 10, idle);
        store.sweep(idle);
        assert!(store.get("a").is_none());
    }

    #[test]
    fn active_entries_survive_a_sweep() {
        let mut store = MemoryStore::<Until>::default();
        for i in 0..5000i64 {
            store.entry(i.to_string().as_str(), 0, idle).0 = Micros::MAX;
        }
        assert_eq!(store.len(), 5000);
        store.sweep(idle);
        assert_eq!(store.len(), 5000);
    }
}
