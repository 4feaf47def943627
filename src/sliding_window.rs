//! The precision sliding window (the seeds' `over_limit_sliding_window`, "Sliding Window",
//! pattern 3): each limit's window of `duration` is cut into buckets of `precision`, and a bucket's
//! weight comes back when the window slides past it. Weight spent at 6:05 returns at 7:05, not at
//! 7:00 for everyone at once (no stampede at the top of the hour).
//!
//! As with the fixed window, a call checks every limit of every identifier first and counts only
//! when all of them admit it; weights cost more than one.
//!
//! Pure: no I/O, time is an argument. [`Buckets`] is one identifier's state in memory;
//! `lua/sliding_window.lua` keeps the same buckets in a Redis hash. Both hand the judge the
//! counts of each limit's live buckets, oldest first.

use std::collections::VecDeque;

use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{duration_option, Micros};
use crate::verdict::{check_limit_count, Tally, Verdict, NEVER};

/// The most buckets one window may have (`duration / precision`).
pub const MAX_BUCKETS: i64 = 3600;

/// The number of buckets a window gets when no precision is given.
pub const DEFAULT_BUCKETS: f64 = 10.0;

/// One limit: at most `limit` weight in any `duration`, counted in buckets of `precision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingLimit {
    pub duration: Micros,
    pub precision: Micros,
    /// Buckets per window: `ceil(duration / precision)`.
    pub buckets: i64,
    pub limit: u64,
}

/// A validated set of sliding-window limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingWindow {
    limits: Vec<SlidingLimit>,
}

impl SlidingWindow {
    /// Validates `(duration, limit, precision)` triples (milliseconds): 1 to 16 of them; the
    /// precision defaults to a tenth of the duration and may not cut a window into more than
    /// [`MAX_BUCKETS`] buckets.
    pub fn new(limits: &[(f64, f64, Option<f64>)]) -> Outcome<Self> {
        check_limit_count(limits.len())?;
        let limits = limits
            .iter()
            .enumerate()
            .map(|(i, &(duration_ms, limit, precision_ms))| {
                let duration = duration_option(&format!("limits[{i}].duration"), duration_ms, 0.0, true)?;
                let precision_ms = precision_ms.unwrap_or((duration_ms / DEFAULT_BUCKETS).max(0.001));
                let name = format!("limits[{i}].precision");
                let precision = duration_option(&name, precision_ms, 0.0, true)?.min(duration);
                let buckets = (duration + precision - 1) / precision;
                if buckets > MAX_BUCKETS {
                    return Err(Failure::range_error(
                        ErrorCode::InvalidOption,
                        format!("`{name}` cuts the window into {buckets} buckets; at most {MAX_BUCKETS} are allowed"),
                    ));
                }
                Ok(SlidingLimit {
                    duration,
                    precision,
                    buckets,
                    limit: count_option(&format!("limits[{i}].limit"), limit, 1.0)?,
                })
            })
            .collect::<Outcome<Vec<_>>>()?;
        Ok(Self { limits })
    }

    pub fn limits(&self) -> &[SlidingLimit] {
        &self.limits
    }

    /// The bucket of limit `j` that holds `now`.
    pub fn bucket(&self, j: usize, now: Micros) -> i64 {
        now.div_euclid(self.limits[j].precision)
    }

    /// The oldest bucket of limit `j` still in the window at `now`.
    pub fn first_live_bucket(&self, j: usize, now: Micros) -> i64 {
        self.bucket(j, now) - self.limits[j].buckets + 1
    }

    /// The verdict on adding `weight` at `now`. `live` holds, per identifier and limit
    /// (identifier-major), the counts of that limit's live buckets, oldest first
    /// (`buckets` numbers from [`first_live_bucket`](Self::first_live_bucket)). With `charge` an
    /// allowed weight counts in `remaining` and `reset_after` (a consume); without, they are
    /// those of now (a peek).
    pub fn judge(&self, live: &[&[u64]], weight: u64, now: Micros, charge: bool) -> Verdict {
        let per_id = self.limits.len();
        let totals: Vec<u64> = live.iter().map(|counts| counts.iter().sum()).collect();
        let mut allowed = true;
        let mut time_left: Micros = 0;
        for (k, counts) in live.iter().enumerate() {
            let j = k % per_id;
            let limit = self.limits[j].limit;
            if weight > limit {
                allowed = false;
                time_left = NEVER;
            } else if totals[k] + weight > limit {
                allowed = false;
                let wait = self.until_enough_expires(j, counts, totals[k] + weight - limit, now);
                time_left = time_left.max(wait);
            }
        }
        let added = if allowed && charge { weight } else { 0 };
        let mut tally = Tally::default();
        for (k, counts) in live.iter().enumerate() {
            let j = k % per_id;
            // Everything is back to zero when the newest non-empty bucket leaves the window.
            let newest = if added > 0 {
                Some(self.bucket(j, now))
            } else {
                counts
                    .iter()
                    .rposition(|&c| c > 0)
                    .map(|i| self.first_live_bucket(j, now) + i as i64)
            };
            let reset_after = newest.map_or(0, |newest| self.bucket_expiry(j, newest) - now);
            tally.add(self.limits[j].limit, totals[k] + added, reset_after);
        }
        tally.verdict(allowed, time_left)
    }

    /// When bucket `bucket` of limit `j` leaves the window.
    fn bucket_expiry(&self, j: usize, bucket: i64) -> Micros {
        (bucket + self.limits[j].buckets) * self.limits[j].precision
    }

    /// How long until at least `excess` weight has left the window of limit `j`.
    fn until_enough_expires(&self, j: usize, counts: &[u64], excess: u64, now: Micros) -> Micros {
        let first = self.first_live_bucket(j, now);
        let mut expired = 0;
        for (i, &count) in counts.iter().enumerate() {
            expired += count;
            if expired >= excess {
                return self.bucket_expiry(j, first + i as i64) - now;
            }
        }
        // Only the call's own weight is over: it fits once the window is empty.
        self.bucket_expiry(j, self.bucket(j, now)) - now
    }
}

/// One identifier's buckets, per limit: the non-empty ones, oldest first.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Buckets {
    per_limit: Vec<VecDeque<(i64, u64)>>,
}

impl Buckets {
    /// The live buckets' counts of every limit at `now` (dense, oldest first), appended to
    /// `into`, with where each limit's counts start.
    pub fn live_counts(&self, window: &SlidingWindow, now: Micros, into: &mut Vec<u64>) {
        for (j, limit) in window.limits.iter().enumerate() {
            let start = into.len();
            into.resize(start + limit.buckets as usize, 0);
            let first = window.first_live_bucket(j, now);
            for &(bucket, count) in self.per_limit.get(j).into_iter().flatten() {
                if let Ok(offset) = usize::try_from(bucket - first) {
                    if let Some(slot) = into.get_mut(start + offset) {
                        *slot += count;
                    }
                }
            }
        }
    }

    /// Drops the buckets that left the window at `now`.
    pub fn forget(&mut self, window: &SlidingWindow, now: Micros) {
        for (j, buckets) in self.per_limit.iter_mut().enumerate() {
            let first = window.first_live_bucket(j, now);
            while buckets.front().is_some_and(|&(bucket, _)| bucket < first) {
                buckets.pop_front();
            }
        }
    }

    /// Counts `weight` in every limit's current bucket, dropping buckets out of the window.
    pub fn add(&mut self, window: &SlidingWindow, weight: u64, now: Micros) {
        self.per_limit.resize(window.limits.len(), VecDeque::new());
        self.forget(window, now);
        for (j, buckets) in self.per_limit.iter_mut().enumerate() {
            let current = window.bucket(j, now);
            match buckets.iter_mut().find(|(bucket, _)| *bucket == current) {
                Some((_, count)) => *count += weight,
                None => {
                    let at = buckets.partition_point(|&(bucket, _)| bucket < current);
                    buckets.insert(at, (current, weight));
                }
            }
        }
    }

    /// Gives `weight` back to every limit, from its newest live bucket backwards, never below
    /// zero. Returns `true` when no bucket holds anything any more.
    pub fn reward(&mut self, window: &SlidingWindow, weight: u64, now: Micros) -> bool {
        self.forget(window, now);
        for buckets in &mut self.per_limit {
            let mut left = weight;
            for (_, count) in buckets.iter_mut().rev() {
                let taken = left.min(*count);
                *count -= taken;
                left -= taken;
            }
            buckets.retain(|&(_, count)| count > 0);
        }
        self.per_limit.iter().all(VecDeque::is_empty)
    }

    /// True when every bucket has left its window.
    pub fn is_idle(&self, window: &SlidingWindow, now: Micros) -> bool {
        self.per_limit.iter().enumerate().all(|(j, buckets)| {
            buckets
                .back()
                .is_none_or(|&(bucket, _)| bucket < window.first_live_bucket(j, now))
        })
    }
}

/// Splits the dense live counts of [`Buckets::live_counts`] (or of the Lua reply) into one slice
/// per identifier and limit, as [`SlidingWindow::judge`] takes them.
pub fn split_live<'a>(
    window: &SlidingWindow,
    ids: usize,
    counts: &'a [u64],
) -> Option<Vec<&'a [u64]>> {
    let mut slices = Vec::with_capacity(ids * window.limits.len());
    let mut rest = counts;
    for _ in 0..ids {
        for limit in &window.limits {
            let (head, tail) = rest.split_at_checked(limit.buckets as usize)?;
            slices.push(head);
            rest = tail;
        }
    }
    rest.is_empty().then_some(slices)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;

    fn window(limits: &[(f64, f64, Option<f64>)]) -> SlidingWindow {
        SlidingWindow::new(limits).unwrap()
    }

    fn consume(w: &SlidingWindow, ids: &mut [&mut Buckets], weight: u64, now: Micros) -> Verdict {
        let mut counts = Vec::new();
        for b in ids.iter() {
            b.live_counts(w, now, &mut counts);
        }
        let live = split_live(w, ids.len(), &counts).unwrap();
        let verdict = w.judge(&live, weight, now, true);
        if verdict.allowed {
            for b in ids.iter_mut() {
                b.add(w, weight, now);
            }
        }
        verdict
    }

    #[test]
    fn a_reward_empties_the_newest_buckets_first() {
        let w = window(&[(60_000.0, 10.0, Some(15_000.0))]);
        let mut b = Buckets::default();
        b.add(&w, 3, 5 * SECOND);
        b.add(&w, 2, 20 * SECOND);
        assert!(!b.reward(&w, 3, 20 * SECOND));
        let mut counts = Vec::new();
        b.live_counts(&w, 20 * SECOND, &mut counts);
        assert_eq!(counts, [0, 0, 2, 0]);
        assert!(b.reward(&w, 5, 20 * SECOND));
    }

    #[test]
    fn weight_comes_back_bucket_by_bucket() {
        // 4 per minute in 15 s buckets (the seed's table).
        let w = window(&[(60_000.0, 4.0, Some(15_000.0))]);
        let mut b = Buckets::default();
        assert!(consume(&w, &mut [&mut b], 1, 5 * SECOND).allowed); // bucket [0, 15)
        assert!(consume(&w, &mut [&mut b], 1, 15 * SECOND).allowed); // [15, 30)
        assert!(consume(&w, &mut [&mut b], 2, 40 * SECOND).allowed); // [30, 45)
        let refused = consume(&w, &mut [&mut b], 1, 50 * SECOND);
        // The first bucket leaves the window at 60 s.
        assert_eq!(
            refused,
            Verdict {
                allowed: false,
                time_left: 10 * SECOND,
                remaining: 0,
                limit: 4,
                reset_after: 40 * SECOND
            }
        );
        let v = consume(&w, &mut [&mut b], 1, 60 * SECOND);
        assert_eq!(
            (v.allowed, v.remaining, v.reset_after),
            (true, 0, 60 * SECOND)
        );
        // Two need both the 15 s and the 30 s buckets gone: at 90 s.
        let v = consume(&w, &mut [&mut b], 2, 61 * SECOND);
        assert_eq!((v.allowed, v.time_left), (false, 29 * SECOND));
    }

    #[test]
    fn unlike_a_fixed_window_there_is_no_reset_at_the_top_of_the_window() {
        let w = window(&[(60_000.0, 10.0, Some(1000.0))]);
        let mut b = Buckets::default();
        assert!(consume(&w, &mut [&mut b], 10, 59 * SECOND).allowed);
        // A fixed window would admit 10 more at 60 s; the sliding window waits until 119 s.
        let v = consume(&w, &mut [&mut b], 1, 60 * SECOND);
        assert_eq!((v.allowed, v.time_left), (false, 59 * SECOND));
        assert!(consume(&w, &mut [&mut b], 10, 119 * SECOND).allowed);
    }

    #[test]
    fn burst_then_sustained_is_one_window() {
        // The seed's case: 1000 in 1 s, 5000 in 10 s, 7000 in 15 s.
        let w = window(&[
            (1000.0, 1000.0, Some(100.0)),
            (10_000.0, 5000.0, Some(1000.0)),
            (15_000.0, 7000.0, Some(1000.0)),
        ]);
        let mut b = Buckets::default();
        let mut allowed = 0u64;
        // A client sending 2000 per second, in 100 ms steps of 200.
        let mut admitted_by_second = Vec::new();
        for second in 0..15 {
            let before = allowed;
            for step in 0..10 {
                let now = second * SECOND + step * 100 * MS;
                if consume(&w, &mut [&mut b], 200, now).allowed {
                    allowed += 200;
                }
            }
            admitted_by_second.push(allowed - before);
        }
        // A burst of 1000 per second for 5 seconds, then the 10 s limit holds it to nothing
        // until the first seconds leave the window; over 15 s no more than 7000 pass.
        assert_eq!(admitted_by_second[..5], [1000; 5]);
        assert_eq!(admitted_by_second[5..10], [0; 5]);
        assert_eq!(allowed, 7000);
        assert_eq!(admitted_by_second[10..].iter().sum::<u64>(), 2000);
    }

    #[test]
    fn only_allowed_weight_counts_and_all_ids_must_admit() {
        let w = window(&[(1000.0, 3.0, Some(100.0))]);
        let (mut ip, mut user) = (Buckets::default(), Buckets::default());
        assert!(consume(&w, &mut [&mut ip], 3, 0).allowed);
        let v = consume(&w, &mut [&mut user, &mut ip], 1, 50 * MS);
        assert_eq!((v.allowed, v.time_left), (false, 950 * MS));
        assert!(user.is_idle(&w, 50 * MS));
        let never = consume(&w, &mut [&mut user], 4, 60 * MS);
        assert_eq!((never.allowed, never.time_left), (false, NEVER));
    }

    #[test]
    fn buckets_leave_and_go_idle() {
        let w = window(&[(1000.0, 5.0, None)]);
        assert_eq!(w.limits()[0].precision, 100 * MS);
        let mut b = Buckets::default();
        b.add(&w, 2, 0);
        b.add(&w, 1, 950 * MS);
        let mut counts = Vec::new();
        b.live_counts(&w, 1000 * MS, &mut counts);
        // At 1 s the live buckets are [100 ms, 1100 ms): the one at 0 has left, 950 ms is 9th.
        assert_eq!(counts, [0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
        // The bucket [900 ms, 1000 ms) leaves the window at 1900 ms.
        assert!(!b.is_idle(&w, 1899 * MS));
        assert!(b.is_idle(&w, 1900 * MS));
    }

    #[test]
    fn options_are_validated() {
        for (limits, name) in [
            (vec![], "`limits`"),
            (vec![(1000.0, 1.0, Some(0.0))], "`limits[0].precision`"),
            (
                vec![(3_600_000.0, 1.0, Some(100.0))],
                "`limits[0].precision`",
            ),
            (vec![(1000.0, 0.0, None)], "`limits[0].limit`"),
            (vec![(-5.0, 1.0, None)], "`limits[0].duration`"),
        ] {
            let err = SlidingWindow::new(&limits).unwrap_err();
            assert!(err.message.contains(name), "{}", err.message);
        }
        // A precision above the duration is the duration: one bucket, a fixed window.
        assert_eq!(
            window(&[(1000.0, 1.0, Some(5000.0))]).limits()[0].buckets,
            1
        );
    }
}
