//! The rolling window of rolling-rate-limiter (the ClassDojo post): a sorted log of action
//! timestamps per id, at most `max_in_interval` actions in any `interval`, and at least
//! `min_difference` between two consecutive actions.
//!
//! Pure: no I/O, time is an argument. [`Timeline`] is one id's log in memory;
//! `lua/rolling_window.lua` keeps the same log in a Redis sorted set. Both reduce the log to
//! [`WindowFacts`] and answer through [`RollingWindow::info`], which computes exactly what
//! rolling-rate-limiter 0.4's `calculateInfo` computes, so the two stores and the two libraries
//! agree to the microsecond.
//!
//! Only the newest `max_in_interval` timestamps ever matter to an answer (the count saturates
//! there, and the wait is measured from the `max_in_interval`-th newest), so the log is capped at
//! that length: memory per id is bounded even under a flood of blocked attempts.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{duration_option, micros_to_millis_ceil, Micros};
use crate::verdict::{Verdict, NEVER};

/// The most actions one call of the sliding log may log or ask about (`weight`): each is an
/// entry of the log, a member of a sorted set on Redis, written by one script that blocks Redis
/// meanwhile (about 3 µs a member: 30 ms for this many; a million blocked it for seconds, found by
/// the fuzz test). The limit itself (`maxInInterval`) may be larger: its log fills over many calls.
pub const MAX_LOGGED_WEIGHT: u64 = 10_000;

/// Checks the `weight` of a sliding log's `consume` or `peek` against [`MAX_LOGGED_WEIGHT`].
pub fn check_logged_weight(weight: u64) -> Outcome<()> {
    if weight > MAX_LOGGED_WEIGHT {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!(
                "`weight` of a sliding log's call must be at most {MAX_LOGGED_WEIGHT} (each action is an entry of the log), got {weight}"
            ),
        ));
    }
    Ok(())
}

/// A validated rolling-window configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingWindow {
    interval: Micros,
    max_in_interval: usize,
    min_difference: Micros,
    record_blocked: bool,
}

/// What the answer depends on, read off the log with the current action placed in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowFacts {
    /// Actions in the window, the current one included.
    pub count: usize,
    /// The newest timestamp (normally the current action's).
    pub current: Micros,
    /// The timestamp before `current`, when there is one.
    pub previous: Option<Micros>,
    /// The timestamp at index `max(0, count - max_in_interval)`: the window is no longer full
    /// `interval` after it.
    pub anchor: Micros,
}

/// rolling-rate-limiter's `RateLimitInfo`, with the wait kept in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowInfo {
    pub blocked: bool,
    pub blocked_due_to_count: bool,
    pub blocked_due_to_min_difference: bool,
    pub micros_until_allowed: Micros,
    pub actions_remaining: u64,
}

impl WindowInfo {
    /// The wait in whole milliseconds, rounded up.
    pub fn millis_until_allowed(&self) -> i64 {
        micros_to_millis_ceil(self.micros_until_allowed)
    }
}

impl RollingWindow {
    /// Validates rolling-rate-limiter's options (milliseconds).
    ///
    /// `interval` > 0, `max_in_interval` a whole number from 1 to
    /// [`MAX_COUNT`](crate::fixed_window::MAX_COUNT) (any limit rolling-rate-limiter takes: memory
    /// per id grows with the log, one entry per action), `min_difference` >= 0; anything else is a
    /// `RangeError` naming the option.
    pub fn new(
        interval_ms: f64,
        max_in_interval: f64,
        min_difference_ms: f64,
        record_blocked: bool,
    ) -> Outcome<Self> {
        let interval = duration_option("interval", interval_ms, 0.0, true)?;
        let min_difference = duration_option("minDifference", min_difference_ms, 0.0, false)?;
        let max_in_interval = count_option("maxInInterval", max_in_interval, 1.0)?;
        Ok(Self {
            interval,
            max_in_interval: usize::try_from(max_in_interval).unwrap_or(usize::MAX),
            min_difference,
            record_blocked,
        })
    }

    pub fn interval(&self) -> Micros {
        self.interval
    }

    pub fn max_in_interval(&self) -> usize {
        self.max_in_interval
    }

    pub fn min_difference(&self) -> Micros {
        self.min_difference
    }

    pub fn record_blocked(&self) -> bool {
        self.record_blocked
    }

    /// Timestamps at or before this instant have left the window.
    pub fn window_start(&self, now: Micros) -> Micros {
        now - self.interval
    }

    /// rolling-rate-limiter's `calculateInfo`, on the facts of a log.
    pub fn info(&self, facts: &WindowFacts) -> WindowInfo {
        let blocked_due_to_count = facts.count > self.max_in_interval;
        let blocked_due_to_min_difference = self.min_difference > 0
            && facts
                .previous
                .is_some_and(|previous| facts.current - previous < self.min_difference);
        let until_unblocked = if facts.count >= self.max_in_interval {
            facts.anchor - facts.current + self.interval
        } else {
            0
        };
        WindowInfo {
            blocked: blocked_due_to_count || blocked_due_to_min_difference,
            blocked_due_to_count,
            blocked_due_to_min_difference,
            micros_until_allowed: self.min_difference.max(until_unblocked),
            actions_remaining: self.max_in_interval.saturating_sub(facts.count) as u64,
        }
    }

    /// The answer to a blocked attempt that was not recorded (`record_blocked` is false):
    /// rolling-rate-limiter's formula assumes the attempt was recorded, so the wait and the
    /// actions remaining are those of the log without it (as the sliding log's).
    pub fn unrecorded(&self, info: WindowInfo, log: &LogFacts, now: Micros) -> WindowInfo {
        let verdict = self.judge(log, 1, now, false);
        WindowInfo {
            micros_until_allowed: verdict.time_left,
            // rolling-rate-limiter's count of room in the window, whatever minDifference says.
            actions_remaining: self.max_in_interval.saturating_sub(log.in_window) as u64,
            ..info
        }
    }

    /// The index of the anchor in a log of `count` timestamps.
    pub fn anchor_index(&self, count: usize) -> usize {
        count.saturating_sub(self.max_in_interval)
    }
}

/// How long past the window the sliding log keeps what a late call (from a host whose clock is
/// behind, by up to this much) still counts: the second of clock skew that the key's TTL allows
/// too. Without it, a refused call at `now` would trim actions that a call at `now - 1 ms` must
/// see, and that call could be admitted over the limit.
pub const LATE_CALL_MARGIN: Micros = crate::time::CLOCK_SKEW;

/// One logged action: when, and the metadata given with it (the sliding log's `{ meta }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub at: Micros,
    pub meta: Option<Arc<str>>,
}

/// What the sliding log's verdict depends on, read off the log before the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogFacts {
    /// Actions in the window.
    pub in_window: usize,
    /// The newest of them, if any.
    pub newest: Option<Micros>,
    /// The `k`-th oldest of them, `k = in_window + weight - max_in_interval`, when that is at
    /// least 1: the window admits the weight once it has left.
    pub anchor: Option<Micros>,
}

impl RollingWindow {
    /// The sliding log's verdict on `weight` actions at `now`: allowed when the window has room
    /// for all of them and the newest is at least `min_difference` old. Only allowed actions are
    /// logged, whatever `record_blocked` says. With `charge` (a consume) an allowed weight is
    /// logged before `remaining` and `reset_after` are reported; without (a peek), they are those
    /// of now. `remaining` is what could be logged right now: 0 while the newest action is less
    /// than `min_difference` old.
    pub fn judge(&self, facts: &LogFacts, weight: u64, now: Micros, charge: bool) -> Verdict {
        let max = self.max_in_interval as u64;
        let in_window = facts.in_window as u64;
        let by_count = in_window + weight > max;
        let gap_wait = match facts.newest {
            Some(newest) if self.min_difference > 0 => (newest + self.min_difference - now).max(0),
            _ => 0,
        };
        let allowed = !by_count && gap_wait == 0;
        let time_left = if weight > max {
            NEVER
        } else if allowed {
            0
        } else {
            let count_wait = match (by_count, facts.anchor) {
                (true, Some(anchor)) => (anchor + self.interval - now).max(0),
                _ => 0,
            };
            count_wait.max(gap_wait)
        };
        let charged = allowed && charge;
        let logged = in_window + if charged { weight } else { 0 };
        let newest = if charged { Some(now) } else { facts.newest };
        let spaced = self.min_difference == 0
            || newest.is_none_or(|newest| now - newest >= self.min_difference);
        Verdict {
            allowed,
            time_left,
            remaining: if spaced {
                max.saturating_sub(logged)
            } else {
                0
            },
            limit: max,
            reset_after: newest.map_or(0, |newest| (newest + self.interval - now).max(0)),
        }
    }
}

/// One id's log of actions, oldest first, at most `max_in_interval` long.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Timeline {
    entries: VecDeque<Entry>,
}

impl Timeline {
    /// Attempts an action at `now`: records it (unless it is blocked and the window does not
    /// record blocked actions) and answers as rolling-rate-limiter's `limitWithInfo`.
    pub fn attempt(&mut self, window: &RollingWindow, now: Micros) -> WindowInfo {
        self.forget_before(window.window_start(now));
        // Equal timestamps may go in any order among themselves: only their values are read.
        let position = self.entries.partition_point(|e| e.at <= now);
        self.entries.insert(
            position,
            Entry {
                at: now,
                meta: None,
            },
        );
        let info = window.info(&self.facts(window));
        if info.blocked && !window.record_blocked() {
            self.entries.remove(position);
            return window.unrecorded(info, &self.log_facts(window, now, 1), now);
        }
        self.cap(window);
        info
    }

    /// Answers as rolling-rate-limiter's `wouldLimitWithInfo`: the current action is appended
    /// after the log, which is left as it is.
    pub fn peek(&self, window: &RollingWindow, now: Micros) -> WindowInfo {
        let first = self.first_in_window(window, now);
        let in_window = self.entries.len() - first;
        let count = in_window + 1;
        let anchor_index = window.anchor_index(count);
        let anchor = if anchor_index < in_window {
            self.entries[first + anchor_index].at
        } else {
            now
        };
        let previous = if in_window > 0 {
            self.entries.back().map(|e| e.at)
        } else {
            None
        };
        let info = window.info(&WindowFacts {
            count,
            current: now,
            previous,
            anchor,
        });
        if info.blocked && !window.record_blocked() {
            return window.unrecorded(info, &self.log_facts(window, now, 1), now);
        }
        info
    }

    /// The sliding log's facts at `now` for a call of `weight`.
    pub fn log_facts(&self, window: &RollingWindow, now: Micros, weight: u64) -> LogFacts {
        let first = self.first_in_window(window, now);
        let in_window = self.entries.len() - first;
        let k = (in_window as u64 + weight).checked_sub(window.max_in_interval() as u64);
        let anchor = k
            .filter(|&k| k >= 1 && k <= in_window as u64)
            .map(|k| self.entries[first + k as usize - 1].at);
        LogFacts {
            in_window,
            newest: (in_window > 0).then(|| self.entries[self.entries.len() - 1].at),
            anchor,
        }
    }

    /// The sliding log's `consume`: forgets what left the window (as the Lua script does, allowed
    /// or not), judges, and logs `weight` actions with `meta` when they are allowed.
    pub fn consume(
        &mut self,
        window: &RollingWindow,
        now: Micros,
        weight: u64,
        meta: Option<Arc<str>>,
    ) -> Verdict {
        // Entries stay a little past the window, for calls from hosts whose clock is behind.
        self.forget_before(window.window_start(now) - LATE_CALL_MARGIN);
        let verdict = window.judge(&self.log_facts(window, now, weight), weight, now, true);
        if verdict.allowed {
            self.log(window, now, weight, meta);
        }
        verdict
    }

    /// Gives back `weight` actions: the newest ones are forgotten. Returns `true` when the log
    /// is left empty.
    pub fn reward(&mut self, weight: u64) -> bool {
        let kept = self
            .entries
            .len()
            .saturating_sub(weight.try_into().unwrap_or(usize::MAX));
        self.entries.truncate(kept);
        self.entries.is_empty()
    }

    /// Logs `weight` actions at `now` with `meta`.
    fn log(&mut self, window: &RollingWindow, now: Micros, weight: u64, meta: Option<Arc<str>>) {
        let position = self.entries.partition_point(|e| e.at <= now);
        let entry = Entry { at: now, meta };
        let count = weight.min(window.max_in_interval() as u64) as usize;
        // At once, after the entries at or before `now` (a late call's go in the middle).
        let later = self.entries.split_off(position);
        self.entries.extend(std::iter::repeat_n(entry, count));
        self.entries.extend(later);
        // Not capped (as the script's "consume" does not): a reward takes the newest entries
        // back, and a late call may then count older ones again. Only allowed actions are logged,
        // so the window holds at most `max_in_interval` of them anyway.
    }

    /// The logged actions still in the window at `now`, oldest first: the newest
    /// `max_in_interval` of them (as the script answers).
    pub fn entries(&self, window: &RollingWindow, now: Micros) -> impl Iterator<Item = &Entry> {
        let newest = self.entries.len().saturating_sub(window.max_in_interval());
        self.entries
            .range(self.first_in_window(window, now).max(newest)..)
    }

    /// True when no action is left in the window at `now`: the entry can be dropped.
    pub fn is_idle(&self, window: &RollingWindow, now: Micros) -> bool {
        self.entries
            .back()
            .is_none_or(|newest| newest.at <= window.window_start(now))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn first_in_window(&self, window: &RollingWindow, now: Micros) -> usize {
        let start = window.window_start(now);
        self.entries.partition_point(|e| e.at <= start)
    }

    fn forget_before(&mut self, start: Micros) {
        let expired = self.entries.partition_point(|e| e.at <= start);
        self.entries.drain(..expired);
    }

    /// Keeps the newest `max_in_interval` entries: older ones cannot change any answer of
    /// `attempt` (which logs refusals too, so its log would otherwise grow with them).
    fn cap(&mut self, window: &RollingWindow) {
        let excess = self.entries.len().saturating_sub(window.max_in_interval());
        self.entries.drain(..excess);
    }

    /// The facts of a non-empty sorted log whose newest entry is the current action.
    fn facts(&self, window: &RollingWindow) -> WindowFacts {
        let count = self.entries.len();
        WindowFacts {
            count,
            current: self.entries[count - 1].at,
            previous: count.checked_sub(2).map(|i| self.entries[i].at),
            anchor: self.entries[window.anchor_index(count)].at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;

    fn window(interval: f64, max: f64, min_difference: f64) -> RollingWindow {
        RollingWindow::new(interval, max, min_difference, true).unwrap()
    }

    fn info(
        blocked: (bool, bool, bool),
        wait_ms: i64,
        remaining: u64,
    ) -> (bool, bool, bool, i64, u64) {
        (blocked.0, blocked.1, blocked.2, wait_ms, remaining)
    }

    fn summary(i: WindowInfo) -> (bool, bool, bool, i64, u64) {
        (
            i.blocked,
            i.blocked_due_to_count,
            i.blocked_due_to_min_difference,
            i.millis_until_allowed(),
            i.actions_remaining,
        )
    }

    const ALLOWED: (bool, bool, bool) = (false, false, false);
    const BY_COUNT: (bool, bool, bool) = (true, true, false);
    const BY_MIN_DIFFERENCE: (bool, bool, bool) = (true, false, true);

    // rolling-rate-limiter 0.4.2, "returns info about limiting (no min distance)".
    #[test]
    fn info_without_min_difference_matches_rolling_rate_limiter() {
        let w = window(10.0, 3.0, 0.0);
        let mut t = Timeline::default();
        assert_eq!(summary(t.attempt(&w, 0)), info(ALLOWED, 0, 2));
        assert_eq!(summary(t.attempt(&w, 4 * MS)), info(ALLOWED, 0, 1));
        assert_eq!(summary(t.attempt(&w, 5 * MS)), info(ALLOWED, 5, 0));
        assert_eq!(summary(t.attempt(&w, 8 * MS)), info(BY_COUNT, 6, 0));
        assert_eq!(summary(t.peek(&w, 11 * MS)), info(BY_COUNT, 4, 0));
        assert_eq!(summary(t.peek(&w, 17 * MS)), info(ALLOWED, 0, 1));
    }

    // rolling-rate-limiter 0.4.2, "returns info about limiting (with min distance)".
    #[test]
    fn info_with_min_difference_matches_rolling_rate_limiter() {
        let w = window(10.0, 3.0, 2.0);
        let mut t = Timeline::default();
        assert_eq!(summary(t.attempt(&w, 0)), info(ALLOWED, 2, 2));
        assert_eq!(summary(t.attempt(&w, 4 * MS)), info(ALLOWED, 2, 1));
        assert_eq!(
            summary(t.attempt(&w, 5 * MS)),
            info(BY_MIN_DIFFERENCE, 5, 0)
        );
        assert_eq!(summary(t.attempt(&w, 8 * MS)), info(BY_COUNT, 6, 0));
        assert_eq!(summary(t.peek(&w, 11 * MS)), info(BY_COUNT, 4, 0));
        assert_eq!(summary(t.peek(&w, 17 * MS)), info(ALLOWED, 2, 1));
    }

    // rolling-rate-limiter 0.4.2, "blocked actions count as actions".
    #[test]
    fn blocked_actions_count_when_recorded() {
        let w = window(10.0, 3.0, 0.0);
        let mut t = Timeline::default();
        for _ in 0..3 {
            assert!(!t.attempt(&w, 0).blocked);
        }
        assert!(t.attempt(&w, 9 * MS).blocked);
        assert!(t.attempt(&w, 9 * MS).blocked);
        assert!(!t.attempt(&w, 10 * MS).blocked);
        assert!(t.attempt(&w, 10 * MS).blocked);
    }

    #[test]
    fn blocked_actions_are_forgotten_without_record_blocked() {
        let w = RollingWindow::new(10.0, 3.0, 0.0, false).unwrap();
        let mut t = Timeline::default();
        for _ in 0..3 {
            assert!(!t.attempt(&w, 0).blocked);
        }
        let refused = t.attempt(&w, 9 * MS);
        // Not recorded: free again when the first of the three at 0 leaves, at 10 ms.
        assert_eq!(
            (
                refused.blocked,
                refused.millis_until_allowed(),
                refused.actions_remaining
            ),
            (true, 1, 0)
        );
        assert_eq!(t.len(), 3);
        // The three at 0 have left the window: three more fit.
        for _ in 0..3 {
            assert!(!t.attempt(&w, 10 * MS).blocked);
        }
        assert!(t.attempt(&w, 10 * MS).blocked);
    }

    // rolling-rate-limiter 0.4.2, "prevents actions less than minDistance apart".
    #[test]
    fn an_unrecorded_refusal_waits_only_for_the_gap() {
        // The push worker case: 2 per 3 s, 1 s apart, refusals not recorded.
        let w = RollingWindow::new(3000.0, 2.0, 1000.0, false).unwrap();
        let mut t = Timeline::default();
        assert!(!t.attempt(&w, 0).blocked);
        let refused = t.attempt(&w, 3 * MS);
        assert_eq!(
            (
                refused.blocked_due_to_min_difference,
                refused.millis_until_allowed(),
                refused.actions_remaining
            ),
            (true, 997, 1)
        );
        assert!(!t.attempt(&w, 1000 * MS).blocked);
    }

    #[test]
    fn min_difference_blocks_close_actions() {
        let w = window(10.0, 4.0, 2.0);
        let mut t = Timeline::default();
        assert!(!t.attempt(&w, 0).blocked);
        assert!(t.attempt(&w, 0).blocked);
        assert!(t.attempt(&w, MS).blocked);
        assert!(!t.attempt(&w, 3 * MS).blocked);
        assert!(t.attempt(&w, 3 * MS).blocked);
    }

    #[test]
    fn the_log_never_holds_more_than_max_in_interval() {
        let w = window(1000.0, 5.0, 0.0);
        let mut t = Timeline::default();
        for i in 0..1000 {
            t.attempt(&w, i);
        }
        assert_eq!(t.len(), 5);
        // Capping does not change the answer: the wait runs from the 5th newest attempt.
        let answer = t.attempt(&w, 1000);
        assert!(answer.blocked);
        assert_eq!(answer.micros_until_allowed, 996 - 1000 + 1_000_000);
    }

    #[test]
    fn idle_logs_can_be_dropped() {
        let w = window(10.0, 2.0, 0.0);
        let mut t = Timeline::default();
        assert!(t.is_idle(&w, 0));
        t.attempt(&w, 0);
        assert!(!t.is_idle(&w, 9 * MS));
        // (The memory store asks a clock skew before its newest call: late calls keep it.)
        assert!(t.is_idle(&w, 10 * MS));
    }

    fn consume(w: &RollingWindow, t: &mut Timeline, weight: u64, now: Micros) -> Verdict {
        t.consume(w, now, weight, None)
    }

    #[test]
    fn the_sliding_log_counts_allowed_actions_only() {
        // 3 per minute (the seed's sliding log table), in milliseconds.
        let w = window(60_000.0, 3.0, 0.0);
        let mut t = Timeline::default();
        let second = 1000 * MS;
        for at in [5, 15, 61] {
            assert!(consume(&w, &mut t, 1, at * second).allowed);
        }
        // 12:01:10 is allowed: the request of 12:00:05 left the window.
        let v = consume(&w, &mut t, 1, 70 * second);
        assert_eq!(
            (v.allowed, v.remaining, v.reset_after),
            (true, 0, 60 * second)
        );
        assert!(consume(&w, &mut t, 1, 100 * second).allowed);
        // 12:01:50: 4 in the last minute; refused until 12:01:01 leaves the window at 12:02:01.
        let v = consume(&w, &mut t, 1, 110 * second);
        assert_eq!(
            v,
            Verdict {
                allowed: false,
                time_left: 11 * second,
                remaining: 0,
                limit: 3,
                reset_after: 50 * second
            }
        );
        // 12:02:20: allowed, below the threshold; the refusal was not logged.
        let v = consume(&w, &mut t, 1, 140 * second);
        assert_eq!((v.allowed, v.remaining), (true, 1));
    }

    #[test]
    fn the_sliding_log_charges_weights_and_keeps_min_difference() {
        let w = window(10.0, 5.0, 2.0);
        let mut t = Timeline::default();
        // Room for 2 more, but none right now: the next must wait 2 ms.
        assert_eq!(consume(&w, &mut t, 3, 0).remaining, 0);
        let v = consume(&w, &mut t, 1, MS);
        assert_eq!(v.remaining, 0);
        assert_eq!((v.allowed, v.time_left), (false, MS));
        // Three more need the three at 0 gone: at 10 ms.
        let v = consume(&w, &mut t, 3, 2 * MS);
        assert_eq!((v.allowed, v.time_left, v.remaining), (false, 8 * MS, 2));
        assert!(consume(&w, &mut t, 2, 2 * MS).allowed);
        assert_eq!(consume(&w, &mut t, 6, 9 * MS).time_left, NEVER);
    }

    #[test]
    fn a_late_call_still_counts_what_its_window_holds() {
        // Regression (found by the property test): a refused call at 11 ms dropped the action at
        // 0, and a late call from 9 ms (a host whose clock is behind) was then admitted, a third
        // action within 10 ms.
        let w = window(10.0, 2.0, 0.0);
        let mut t = Timeline::default();
        consume(&w, &mut t, 1, 0);
        consume(&w, &mut t, 1, 8 * MS);
        assert!(!consume(&w, &mut t, 2, 11 * MS).allowed);
        assert!(!consume(&w, &mut t, 1, 9 * MS).allowed);
        assert!(consume(&w, &mut t, 1, 10 * MS).allowed);
        // Forgotten once a second past the window.
        consume(&w, &mut t, 3, 20 * MS + LATE_CALL_MARGIN);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_reward_does_not_uncover_less_than_the_log_held() {
        // Regression (found by the property test): the log was capped at `max_in_interval` on
        // every consume, so after a reward took the newest entries back, a late call saw one
        // action fewer in memory than on Redis (whose log is not capped there).
        let w = window(1000.0, 6.0, 0.0);
        let mut t = Timeline::default();
        consume(&w, &mut t, 1, 0);
        consume(&w, &mut t, 3, 57 * MS);
        assert!(consume(&w, &mut t, 3, 1000 * MS).allowed);
        assert!(!t.reward(3));
        // At 999 ms the window holds the action at 0 and the three at 57 ms.
        let facts = t.log_facts(&w, 999 * MS, 1);
        assert_eq!(w.judge(&facts, 1, 999 * MS, false).remaining, 2);
    }

    #[test]
    fn entries_keep_their_metadata() {
        let w = window(10.0, 3.0, 0.0);
        let mut t = Timeline::default();
        t.consume(&w, 0, 1, Some("user-1".into()));
        t.consume(&w, MS, 2, Some("user-2".into()));
        let metas: Vec<_> = t
            .entries(&w, 5 * MS)
            .map(|e| (e.at, e.meta.as_deref().map(str::to_owned)))
            .collect();
        assert_eq!(
            metas,
            [
                (0, Some("user-1".into())),
                (MS, Some("user-2".into())),
                (MS, Some("user-2".into()))
            ]
        );
        assert_eq!(t.entries(&w, 10 * MS + 500).count(), 2);
    }

    #[test]
    fn options_are_validated() {
        let bad = [
            (0.0, 1.0, 0.0, "`interval`"),
            (-1.0, 1.0, 0.0, "`interval`"),
            (f64::NAN, 1.0, 0.0, "`interval`"),
            (10.0, 0.0, 0.0, "`maxInInterval`"),
            (10.0, 1.5, 0.0, "`maxInInterval`"),
            (10.0, 2e15, 0.0, "`maxInInterval`"),
            (10.0, f64::INFINITY, 0.0, "`maxInInterval`"),
            (10.0, 1.0, -1.0, "`minDifference`"),
        ];
        for (interval, max, min_difference, name) in bad {
            let err = RollingWindow::new(interval, max, min_difference, true).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains(name), "{}", err.message);
        }
    }

    #[test]
    fn a_limit_above_a_hundred_thousand_is_a_limit() {
        // Regression: maxInInterval was capped at 100,000, and a global limit of a million an
        // hour, which rolling-rate-limiter takes, threw.
        let w = RollingWindow::new(3_600_000.0, 1e6, 0.0, true).unwrap();
        let mut t = Timeline::default();
        let first = t.attempt(&w, 0);
        assert_eq!((first.blocked, first.actions_remaining), (false, 999_999));
        let log = RollingWindow::new(3_600_000.0, 1e15, 0.0, false).unwrap();
        let v = log.judge(
            &t.log_facts(&log, 0, MAX_LOGGED_WEIGHT),
            MAX_LOGGED_WEIGHT,
            0,
            true,
        );
        assert_eq!(
            (v.allowed, v.remaining),
            (true, 1e15 as u64 - 1 - MAX_LOGGED_WEIGHT)
        );
    }

    #[test]
    fn one_call_logs_at_most_max_logged_weight_actions() {
        assert!(check_logged_weight(MAX_LOGGED_WEIGHT).is_ok());
        let err = check_logged_weight(MAX_LOGGED_WEIGHT + 1).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert!(err.message.contains("10000"), "{}", err.message);
    }

    #[test]
    fn a_late_weighted_call_logs_its_actions_in_time_order() {
        let w = RollingWindow::new(10_000.0, 100.0, 0.0, false).unwrap();
        let mut t = Timeline::default();
        t.consume(&w, 0, 1, None);
        t.consume(&w, 2 * MS, 1, None);
        t.consume(&w, MS, 3, Some("late".into()));
        let at: Vec<Micros> = t.entries(&w, 2 * MS).map(|e| e.at).collect();
        assert_eq!(at, [0, MS, MS, MS, 2 * MS]);
    }
}
