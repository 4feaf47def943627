//! Fixed window counters (the seeds' `over_limit_multi_lua`, "Fixed Window Counters", "Single
//! Counter"): per identifier and limit, a counter of the current window
//! `floor(now / duration)`, so windows are aligned to the clock and reset together.
//!
//! A call checks every limit of every identifier first and counts only when all of them admit
//! it ("counting correctly": only allowed actions are counted), so several limits (10/s, 120/min
//! and 240/h) over several identifiers (an IP and a user) are judged and counted as one.
//!
//! Pure: no I/O, time is an argument. [`Counters`] is one identifier's state in memory;
//! `lua/fixed_window.lua` keeps the same counters in Redis, and both judge through
//! [`FixedWindow::judge`].

use smallvec::SmallVec;

use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::{duration_option, Micros, CLOCK_SKEW};
use crate::verdict::{check_limit_count, Tally, Verdict, NEVER};

/// The largest `limit` (and weight): counts stay exact in a Lua double.
pub const MAX_COUNT: f64 = 1e15;

/// One limit: at most `limit` weight per window of `duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowLimit {
    pub duration: Micros,
    pub limit: u64,
}

/// A validated set of fixed-window limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedWindow {
    limits: Vec<WindowLimit>,
}

impl FixedWindow {
    /// Validates `(duration in ms, limit)` pairs: 1 to [`MAX_LIMITS`] of them, durations > 0,
    /// limits whole numbers from 1 to [`MAX_COUNT`]. Errors name `limits[i].duration` or
    /// `limits[i].limit`.
    pub fn new(limits: &[(f64, f64)]) -> Outcome<Self> {
        check_limit_count(limits.len())?;
        let limits = limits
            .iter()
            .enumerate()
            .map(|(i, &(duration, limit))| {
                Ok(WindowLimit {
                    duration: duration_option(
                        &format!("limits[{i}].duration"),
                        duration,
                        0.0,
                        true,
                    )?,
                    limit: count_option(&format!("limits[{i}].limit"), limit, 1.0)?,
                })
            })
            .collect::<Outcome<Vec<_>>>()?;
        Ok(Self { limits })
    }

    pub fn limits(&self) -> &[WindowLimit] {
        &self.limits
    }

    /// The index of the window of limit `j` that holds `now`.
    pub fn window(&self, j: usize, now: Micros) -> i64 {
        now.div_euclid(self.limits[j].duration)
    }

    /// The verdict on adding `weight` at `now`, for identifiers whose counters are `counters`:
    /// per identifier and limit (identifier-major), the count and how many windows ahead of
    /// `now`'s the window it counts in is (a late call's counter is ahead: see
    /// [`Counters::counts_at`]), `counters[2 * (i * limits + j)]` and the next. With `charge` an
    /// allowed weight counts in `remaining` and `reset_after` (a consume); without, they are
    /// those of now (a peek). Waits run to the end of the window a counter is in.
    pub fn judge(&self, counters: &[u64], weight: u64, now: Micros, charge: bool) -> Verdict {
        let per_id = self.limits.len();
        let mut allowed = true;
        let mut time_left: Micros = 0;
        for (k, counter) in counters.chunks_exact(2).enumerate() {
            let (j, count, ahead) = (k % per_id, counter[0], counter[1]);
            let limit = self.limits[j].limit;
            if weight > limit {
                allowed = false;
                time_left = NEVER;
            } else if count + weight > limit {
                allowed = false;
                time_left = time_left.max(self.until_window_end(j, now, ahead));
            }
        }
        let added = if allowed && charge { weight } else { 0 };
        let mut tally = Tally::default();
        for (k, counter) in counters.chunks_exact(2).enumerate() {
            let (j, count, ahead) = (k % per_id, counter[0], counter[1]);
            tally.add(
                self.limits[j].limit,
                count + added,
                self.until_window_end(j, now, ahead),
            );
        }
        tally.verdict(allowed, time_left)
    }

    /// The time from `now` to the end of limit `j`'s window `ahead` windows after `now`'s.
    /// (Saturating: an `ahead` read from Redis is at most 2^53, far beyond any real window.)
    fn until_window_end(&self, j: usize, now: Micros, ahead: u64) -> Micros {
        let ahead = Micros::try_from(ahead).unwrap_or(Micros::MAX);
        (self.window(j, now).saturating_add(ahead).saturating_add(1))
            .saturating_mul(self.limits[j].duration)
            .saturating_sub(now)
            .min(NEVER - 1)
    }
}

/// A whole-number count option from `min` to [`MAX_COUNT`].
pub fn count_option(name: &str, value: f64, min: f64) -> Outcome<u64> {
    if value.fract() != 0.0 || !(min..=MAX_COUNT).contains(&value) {
        return Err(Failure::range_error(
            ErrorCode::InvalidOption,
            format!("`{name}` must be a whole number from {min} to {MAX_COUNT:e}, got {value}"),
        ));
    }
    Ok(value as u64)
}

/// One identifier's counters, one per limit: the window each counts in, and its count. One
/// limit's counter is kept inline (24 bytes, no allocation).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counters {
    windows: SmallVec<[(i64, u64); 1]>,
}

impl Counters {
    /// The counters at `now` as [`FixedWindow::judge`] takes them, appended to `into`: per limit
    /// the count (0 for a window that has ended) and how many windows ahead of `now`'s the
    /// window it counts in is.
    ///
    /// A counter never moves back to an older window: a call whose `now` is behind (a host with a
    /// slow clock) counts in the newer window the counter is in, so that two skewed hosts cannot
    /// keep resetting each other's counts, and waits for that window's end.
    pub fn counts_at(&self, limiter: &FixedWindow, now: Micros, into: &mut Vec<u64>) {
        for j in 0..limiter.limits.len() {
            let current = limiter.window(j, now);
            match self.windows.get(j) {
                Some(&(window, count)) if window >= current => {
                    into.extend([count, window.abs_diff(current)])
                }
                _ => into.extend([0, 0]),
            }
        }
    }

    /// Counts `weight` in every limit's current window (or the newer one a counter is in).
    pub fn add(&mut self, limiter: &FixedWindow, weight: u64, now: Micros) {
        self.windows.resize(limiter.limits.len(), (i64::MIN, 0));
        for (j, slot) in self.windows.iter_mut().enumerate() {
            let window = limiter.window(j, now);
            *slot = match *slot {
                (counted, count) if counted >= window => (counted, count + weight),
                _ => (window, weight),
            };
        }
    }

    /// Gives `weight` back to every limit's counter of the current window (or the newer one it
    /// is in), never below zero; a counter of an ended window keeps its count for late calls.
    /// Returns `true` when every window ended [`CLOCK_SKEW`] before `now` (see
    /// [`Counters::is_idle`]): no call that is judged alike on both stores can count in them.
    pub fn reward(&mut self, limiter: &FixedWindow, weight: u64, now: Micros) -> bool {
        for (j, (window, count)) in self.windows.iter_mut().enumerate() {
            if *window >= limiter.window(j, now) {
                *count = count.saturating_sub(weight);
            }
        }
        self.is_idle(limiter, now.saturating_sub(CLOCK_SKEW))
    }

    /// True when every window has ended: the counters hold nothing any more.
    ///
    /// A counter brought to 0 by a reward is not idle before its window ends: it still holds
    /// the window it counts in, which a late call must find (as it finds Redis's hash, kept to
    /// its TTL), or a late call would count in its own older window and the newer window's
    /// counter would restart from 0.
    pub fn is_idle(&self, limiter: &FixedWindow, now: Micros) -> bool {
        self.windows
            .iter()
            .enumerate()
            .all(|(j, &(window, _))| window < limiter.window(j, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;

    fn limiter(limits: &[(f64, f64)]) -> FixedWindow {
        FixedWindow::new(limits).unwrap()
    }

    /// A memory store of one identifier: judge, and count when allowed.
    fn consume(
        limiter: &FixedWindow,
        ids: &mut [&mut Counters],
        weight: u64,
        now: Micros,
    ) -> Verdict {
        let mut counts = Vec::new();
        for counters in ids.iter() {
            counters.counts_at(limiter, now, &mut counts);
        }
        let verdict = limiter.judge(&counts, weight, now, true);
        if verdict.allowed {
            for counters in ids.iter_mut() {
                counters.add(limiter, weight, now);
            }
        }
        verdict
    }

    #[test]
    fn counts_within_a_window_aligned_to_the_clock() {
        // 3 per minute, as in the seed's table: the window of 12:00:05 ends at 12:01:00.
        let w = limiter(&[(60_000.0, 3.0)]);
        let mut c = Counters::default();
        let start = 1_515_120_000 * SECOND;
        let v = consume(&w, &mut [&mut c], 1, start + 5 * SECOND);
        assert_eq!(
            (v.allowed, v.remaining, v.limit, v.reset_after),
            (true, 2, 3, 55 * SECOND)
        );
        assert!(consume(&w, &mut [&mut c], 1, start + 15 * SECOND).allowed);
        // 12:01:01: a new window.
        let v = consume(&w, &mut [&mut c], 1, start + 61 * SECOND);
        assert_eq!((v.allowed, v.remaining), (true, 2));
        assert!(consume(&w, &mut [&mut c], 1, start + 70 * SECOND).allowed);
        assert!(consume(&w, &mut [&mut c], 1, start + 100 * SECOND).allowed);
        let refused = consume(&w, &mut [&mut c], 1, start + 110 * SECOND);
        assert_eq!(
            refused,
            Verdict {
                allowed: false,
                time_left: 10 * SECOND,
                remaining: 0,
                limit: 3,
                reset_after: 10 * SECOND
            }
        );
        assert!(consume(&w, &mut [&mut c], 1, start + 140 * SECOND).allowed);
    }

    #[test]
    fn the_window_edge_belongs_to_the_next_window() {
        let w = limiter(&[(1000.0, 1.0)]);
        let mut c = Counters::default();
        assert!(consume(&w, &mut [&mut c], 1, 999 * MS).allowed);
        assert!(!consume(&w, &mut [&mut c], 1, 999 * MS + 999).allowed);
        assert!(consume(&w, &mut [&mut c], 1, 1000 * MS).allowed);
    }

    #[test]
    fn only_allowed_actions_are_counted() {
        let w = limiter(&[(1000.0, 2.0)]);
        let mut c = Counters::default();
        for _ in 0..2 {
            assert!(consume(&w, &mut [&mut c], 1, 0).allowed);
        }
        for _ in 0..10 {
            assert!(!consume(&w, &mut [&mut c], 1, 10).allowed);
        }
        let mut counts = Vec::new();
        c.counts_at(&w, 10, &mut counts);
        assert_eq!(counts, [2, 0]);
    }

    #[test]
    fn several_limits_are_judged_together() {
        // 10/s, 120/min, 240/h (the seed's defaults), at a rate of 10 per second.
        let w = limiter(&[(1000.0, 10.0), (60_000.0, 120.0), (3_600_000.0, 240.0)]);
        let mut c = Counters::default();
        let mut allowed = 0;
        for second in 0..60 {
            for _ in 0..10 {
                allowed += u32::from(consume(&w, &mut [&mut c], 1, second * SECOND).allowed);
            }
        }
        // The minute limit, not the second limit, stopped it at 120: the minute is the tightest
        // limit until it ends.
        assert_eq!(allowed, 120);
        let v = consume(&w, &mut [&mut c], 1, 59 * SECOND);
        assert_eq!(
            (v.allowed, v.time_left, v.limit, v.remaining),
            (false, SECOND, 120, 0)
        );
        // The next minute admits 100 more; then only 20 are left in the hour, the tightest.
        for second in 60..70 {
            assert!(consume(&w, &mut [&mut c], 10, second * SECOND).allowed);
        }
        let v = consume(&w, &mut [&mut c], 5, 125 * SECOND);
        assert_eq!((v.allowed, v.remaining, v.limit), (true, 5, 10));
        let v = consume(&w, &mut [&mut c], 9, 126 * SECOND);
        assert_eq!((v.allowed, v.remaining, v.limit), (true, 1, 10));
        let v = consume(&w, &mut [&mut c], 5, 127 * SECOND);
        assert_eq!((v.allowed, v.remaining, v.limit), (true, 1, 240));
        let v = consume(&w, &mut [&mut c], 2, 128 * SECOND);
        assert_eq!(
            (v.allowed, v.time_left, v.limit),
            (false, 3_472 * SECOND, 240)
        );
    }

    #[test]
    fn a_refusal_waits_for_every_blocking_window() {
        let w = limiter(&[(1000.0, 5.0), (60_000.0, 6.0)]);
        let mut c = Counters::default();
        assert!(consume(&w, &mut [&mut c], 5, 0).allowed);
        assert!(consume(&w, &mut [&mut c], 1, SECOND).allowed);
        // Both windows are full at 1.5 s; the minute window ends last.
        let v = consume(&w, &mut [&mut c], 5, 1500 * MS);
        assert_eq!((v.allowed, v.time_left), (false, 58_500 * MS));
    }

    #[test]
    fn weights_cost_more_and_a_weight_above_a_limit_never_passes() {
        let w = limiter(&[(1000.0, 10.0)]);
        let mut c = Counters::default();
        let v = consume(&w, &mut [&mut c], 7, 0);
        assert_eq!((v.allowed, v.remaining), (true, 3));
        assert!(!consume(&w, &mut [&mut c], 4, 0).allowed);
        assert!(consume(&w, &mut [&mut c], 3, 0).allowed);
        let never = consume(&w, &mut [&mut Counters::default()], 11, 0);
        assert_eq!((never.allowed, never.time_left), (false, NEVER));
        assert_eq!(never.time_left_millis(), f64::INFINITY);
    }

    #[test]
    fn one_refusing_identifier_refuses_the_call_and_nothing_is_counted() {
        let w = limiter(&[(1000.0, 2.0)]);
        let (mut ip, mut user) = (Counters::default(), Counters::default());
        assert!(consume(&w, &mut [&mut ip], 2, 0).allowed);
        let v = consume(&w, &mut [&mut user, &mut ip], 1, 10);
        assert_eq!((v.allowed, v.remaining), (false, 0));
        let mut counts = Vec::new();
        user.counts_at(&w, 10, &mut counts);
        assert_eq!(counts, [0, 0]);
    }

    #[test]
    fn a_late_call_counts_in_the_newer_window() {
        // Two hosts, one a second behind: the late one must not reset the counter.
        let w = limiter(&[(1000.0, 2.0)]);
        let mut c = Counters::default();
        assert!(consume(&w, &mut [&mut c], 1, 1000 * MS).allowed);
        assert!(consume(&w, &mut [&mut c], 1, 999 * MS).allowed);
        assert!(!consume(&w, &mut [&mut c], 1, 1001 * MS).allowed);
        // ...and waits until that window ends, at 2 s: 1,002 ms from its own 998 ms.
        let late = consume(&w, &mut [&mut c], 1, 998 * MS);
        assert_eq!(
            (late.allowed, late.time_left, late.reset_after),
            (false, 1002 * MS, 1002 * MS)
        );
        let mut counts = Vec::new();
        c.counts_at(&w, 998 * MS, &mut counts);
        assert_eq!(counts, [2, 1]);
    }

    #[test]
    fn a_peek_reports_what_is_left_now() {
        let w = limiter(&[(1000.0, 3.0)]);
        let v = w.judge(&[1, 0], 1, 0, false);
        assert_eq!((v.allowed, v.remaining, v.reset_after), (true, 2, SECOND));
        let v = w.judge(&[0, 0], 1, 0, false);
        assert_eq!((v.allowed, v.remaining, v.reset_after), (true, 3, 0));
    }

    #[test]
    fn a_reward_gives_weight_back_in_the_current_window_only() {
        let w = limiter(&[(1000.0, 5.0), (10_000.0, 8.0)]);
        let mut c = Counters::default();
        c.add(&w, 4, 0);
        c.add(&w, 2, SECOND);
        assert!(!c.reward(&w, 3, SECOND));
        let mut counts = Vec::new();
        c.counts_at(&w, SECOND, &mut counts);
        assert_eq!(counts, [0, 0, 3, 0]);
        // Back to 0, but the 10 s window goes on: a late call still counts in it.
        assert!(!c.reward(&w, 10, SECOND));
        // Idle once every window ended a clock skew ago.
        assert!(!c.reward(&w, 1, 10 * SECOND));
        assert!(c.reward(&w, 1, 11 * SECOND));
    }

    #[test]
    fn a_reward_after_a_window_ended_leaves_its_count_for_late_calls() {
        // Regression: Redis deleted the ended window's counter on a reward, memory kept it, and a
        // late call counted 3 + 1 in memory but 0 + 1 on Redis.
        let w = limiter(&[(1000.0, 5.0), (4000.0, 12.0)]);
        let mut c = Counters::default();
        c.add(&w, 3, 500 * MS);
        assert!(!c.reward(&w, 1, SECOND + 100 * MS));
        let mut counts = Vec::new();
        c.counts_at(&w, 700 * MS, &mut counts);
        assert_eq!(counts, [3, 0, 2, 0]);
    }

    #[test]
    fn a_counter_rewarded_to_zero_keeps_its_window_for_late_calls() {
        let w = limiter(&[(1000.0, 6.0)]);
        let mut c = Counters::default();
        c.add(&w, 1, SECOND);
        assert!(!c.reward(&w, 1, SECOND - MS));
        // A late call (999 ms) counts in the newer window (1 s), as on Redis...
        c.add(&w, 1, SECOND - MS);
        let mut counts = Vec::new();
        c.counts_at(&w, SECOND, &mut counts);
        // ...so the call at 1 s finds it.
        assert_eq!(counts, [1, 0]);
    }

    #[test]
    fn counters_go_idle_when_their_windows_end() {
        let w = limiter(&[(1000.0, 2.0), (10_000.0, 5.0)]);
        let mut c = Counters::default();
        assert!(c.is_idle(&w, 0));
        c.add(&w, 1, 0);
        assert!(!c.is_idle(&w, 9_999 * MS));
        assert!(c.is_idle(&w, 10 * SECOND));
    }

    #[test]
    fn options_are_validated() {
        for (limits, name) in [
            (vec![], "`limits`"),
            (vec![(0.0, 1.0)], "`limits[0].duration`"),
            (vec![(1000.0, 1.0), (1000.0, 0.5)], "`limits[1].limit`"),
            (vec![(1000.0, 1e16)], "`limits[0].limit`"),
            (vec![(f64::NAN, 1.0)], "`limits[0].duration`"),
            (vec![(1000.0, 1.0); 17], "`limits`"),
        ] {
            let err = FixedWindow::new(&limits).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains(name), "{}", err.message);
        }
    }
}
