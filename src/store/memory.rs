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

use std::collections::HashMap;

use crate::time::Micros;

/// The fewest entries at which a sweep runs.
const MIN_SWEEP_SIZE: usize = 1024;

/// Per-id state of one limiter, kept in this process.
#[derive(Debug)]
pub struct MemoryStore<S> {
    entries: HashMap<Box<str>, Slot<S>>,
    /// The map size at which the next sweep runs.
    sweep_at: usize,
    /// The latest instant seen, so that a sweep judges idleness by the newest clock reading.
    latest: Micros,
    /// The most entries kept, if bounded.
    max_keys: Option<usize>,
    /// Counts uses, to order entries by their last use.
    uses: u64,
    /// Entries evicted to stay within `max_keys`.
    evicted: u64,
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
    pub fn entry(&mut self, id: &str, now: Micros, is_idle: impl Fn(&S, Micros) -> bool) -> &mut S {
        self.latest = self.latest.max(now);
        self.uses += 1;
        if !self.entries.contains_key(id) {
            if self.entries.len() >= self.sweep_at {
                self.sweep(&is_idle);
            }
            if let Some(max_keys) = self.max_keys {
                if self.entries.len() >= max_keys {
                    self.sweep(&is_idle);
                    self.evict_down_to(max_keys - max_keys.div_ceil(8));
                }
            }
            let slot = Slot {
                state: S::default(),
                used: self.uses,
            };
            self.entries.insert(id.into(), slot);
        }
        let slot = self.entries.get_mut(id).expect("inserted above");
        slot.used = self.uses;
        &mut slot.state
    }
}

impl<S> MemoryStore<S> {
    /// A store of at most `max_keys` ids (unbounded with `None`).
    pub fn new(max_keys: Option<usize>) -> Self {
        Self {
            entries: HashMap::new(),
            sweep_at: MIN_SWEEP_SIZE,
            latest: Micros::MIN,
            max_keys,
            uses: 0,
            evicted: 0,
        }
    }

    /// The state of `id`, if it has one.
    pub fn get(&self, id: &str) -> Option<&S> {
        self.entries.get(id).map(|slot| &slot.state)
    }

    /// The state of `id`, if it has one, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut S> {
        self.uses += 1;
        let slot = self.entries.get_mut(id)?;
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
    pub fn remove(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// How many ids have state.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops idle entries and gives memory back when the map has shrunk a lot.
    pub fn sweep(&mut self, is_idle: impl Fn(&S, Micros) -> bool) {
        let latest = self.latest;
        self.entries.retain(|_, slot| !is_idle(&slot.state, latest));
        self.shrink();
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
    fn idle_entries_are_swept_as_the_map_grows() {
        let mut store = MemoryStore::<Until>::default();
        // A million ids, each idle as soon as the clock moves on: the map never grows past
        // twice the sweep threshold.
        for i in 0..1_000_000i64 {
            store.entry(&i.to_string(), i, idle).0 = i + 1;
            assert!(store.len() <= 2 * MIN_SWEEP_SIZE);
        }
    }

    #[test]
    fn max_keys_evicts_the_least_recently_used() {
        let mut store = MemoryStore::<Until>::new(Some(100));
        for i in 0..100i64 {
            store.entry(&i.to_string(), 0, idle).0 = Micros::MAX;
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
            store.entry(&i.to_string(), 0, idle).0 = if i < 5 { 0 } else { Micros::MAX };
        }
        store.entry("new", 1, idle);
        assert_eq!((store.len(), store.evicted()), (6, 0));
    }

    #[test]
    fn a_million_ids_stay_within_max_keys() {
        let mut store = MemoryStore::<Until>::new(Some(100_000));
        for i in 0..1_000_000i64 {
            store.entry(&i.to_string(), 0, idle).0 = Micros::MAX;
            assert!(store.len() <= 100_000);
        }
        assert_eq!(store.evicted() + store.len() as u64, 1_000_000);
    }

    #[test]
    fn active_entries_survive_a_sweep() {
        let mut store = MemoryStore::<Until>::default();
        for i in 0..5000i64 {
            store.entry(&i.to_string(), 0, idle).0 = Micros::MAX;
        }
        assert_eq!(store.len(), 5000);
        store.sweep(idle);
        assert_eq!(store.len(), 5000);
    }
}
