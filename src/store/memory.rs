//! The in-memory store: one algorithm state per id, in a hash map that sweeps itself.
//!
//! Idle entries (those whose state no longer affects any answer) are removed in a sweep that runs
//! whenever the map has doubled since the last one, so the work per call stays constant on
//! average and the map holds at most about twice the ids active within one window.

use std::collections::HashMap;

use crate::time::Micros;

/// The fewest entries at which a sweep runs.
const MIN_SWEEP_SIZE: usize = 1024;

/// Per-id state of one limiter, kept in this process.
#[derive(Debug)]
pub struct MemoryStore<S> {
    entries: HashMap<Box<str>, S>,
    /// The map size at which the next sweep runs.
    sweep_at: usize,
    /// The latest instant seen, so that a sweep judges idleness by the newest clock reading.
    latest: Micros,
}

impl<S> Default for MemoryStore<S> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            sweep_at: MIN_SWEEP_SIZE,
            latest: Micros::MIN,
        }
    }
}

impl<S: Default> MemoryStore<S> {
    /// The state of `id` (a fresh one when it has none), for a call at `now`.
    ///
    /// `is_idle(state, now)` tells whether a state can be dropped: it is asked of every entry
    /// during a sweep.
    pub fn entry(&mut self, id: &str, now: Micros, is_idle: impl Fn(&S, Micros) -> bool) -> &mut S {
        self.latest = self.latest.max(now);
        if !self.entries.contains_key(id) {
            if self.entries.len() >= self.sweep_at {
                self.sweep(&is_idle);
            }
            self.entries.insert(id.into(), S::default());
        }
        self.entries.get_mut(id).expect("inserted above")
    }
}

impl<S> MemoryStore<S> {
    /// The state of `id`, if it has one.
    pub fn get(&self, id: &str) -> Option<&S> {
        self.entries.get(id)
    }

    /// The state of `id`, if it has one, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut S> {
        self.entries.get_mut(id)
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
        self.entries.retain(|_, state| !is_idle(state, latest));
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
