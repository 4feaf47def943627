//! The sliding tail (the seed's "Sliding Tail": fixed window counters with history): per
//! identifier and limit, the count of the current window `floor(now / duration)` and of the one
//! before it. The previous window is taken to have been spread evenly, so the part of it still
//! inside the sliding window `(now - duration, now]` counts pro rata:
//!
//! ```text
//! F = floor(previous * (duration - elapsed) / duration) + current
//! ```
//!
//! with `elapsed` the time since the current window started. A call of `weight` is allowed when
//! `F + weight <= limit` for every limit of every identifier, and only allowed calls count. The
//! previous window's share is rounded down: a fraction of an action does not count.
//!
//! The cost of two counters is an approximation: any interval of one `duration` admits at most
//! twice the limit (each fixed window admits at most `limit`), reached when all of a window's
//! weight came at its very end. Random traffic passes the limit by far less: a few percent at a
//! sustained overload (see the README for measured figures).
//!
//! Pure: no I/O, time is an argument. [`Tails`] is one identifier's state in memory;
//! `lua/sliding_tail.lua` keeps the same counters in a Redis hash, and both judge through
//! [`SlidingTail::judge`].

use crate::error::Outcome;
use crate::fixed_window::{FixedWindow, WindowLimit};
use crate::time::Micros;
use crate::verdict::{Tally, Verdict, NEVER};

/// How many numbers one limit of one identifier takes in the counts: window, current, previous.
pub const COUNTS_PER_LIMIT: usize = 3;

/// A validated set of sliding-tail limits: at most `limit` weight per `duration`, windows
/// aligned to the clock. The limits are a fixed window's; only the judgement differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingTail {
    windows: FixedWindow,
}

impl From<FixedWindow> for SlidingTail {
    fn from(windows: FixedWindow) -> Self {
        Self { windows }
    }
}

impl SlidingTail {
    /// Validates `(duration in ms, limit)` pairs exactly as [`FixedWindow::new`] does.
    pub fn new(limits: &[(f64, f64)]) -> Outcome<Self> {
        FixedWindow::new(limits).map(Self::from)
    }

    /// The limits, as a fixed window of the same limits holds them.
    pub fn windows(&self) -> &FixedWindow {
        &self.windows
    }

    pub fn limits(&self) -> &[WindowLimit] {
        self.windows.limits()
    }

    /// The verdict on adding `weight` at `now` for identifiers whose counters at `now` are
    /// `tails` (identifier-major: `tails[i * limits + j]`, each as [`Tail::at`] gives it). With
    /// `charge` an allowed weight counts in `remaining` and `reset_after` (a consume); without,
    /// they are those of now (a peek).
    pub fn judge(&self, tails: &[Tail], weight: u64, now: Micros, charge: bool) -> Verdict {
        let per_id = self.limits().len();
        let mut allowed = true;
        let mut never = false;
        let mut until = i128::from(now);
        for (k, tail) in tails.iter().enumerate() {
            let limit = &self.limits()[k % per_id];
            if weight > limit.limit {
                allowed = false;
                never = true;
            } else if tail.weighted(limit.duration, now) + u128::from(weight)
                > u128::from(limit.limit)
            {
                allowed = false;
                until = until.max(tail.earliest(limit.duration, limit.limit - weight, now));
            }
        }
        let time_left = match (never, allowed) {
            (true, _) => NEVER,
            (false, true) => 0,
            (false, false) => span(until, now),
        };
        let added = if allowed && charge { weight } else { 0 };
        let mut tally = Tally::default();
        for (k, tail) in tails.iter().enumerate() {
            let limit = &self.limits()[k % per_id];
            let charged = Tail {
                current: tail.current.saturating_add(added),
                ..*tail
            };
            let used = charged.weighted(limit.duration, now);
            let empty_at = charged.earliest(limit.duration, 0, now);
            tally.add(
                limit.limit,
                u64::try_from(used).unwrap_or(u64::MAX),
                span(empty_at, now),
            );
        }
        tally.verdict(allowed, time_left)
    }
}

/// `until - now` as a duration (the instants stay far below `i64::MAX`; saturated regardless).
fn span(until: i128, now: Micros) -> Micros {
    Micros::try_from(until - i128::from(now)).unwrap_or(NEVER - 1)
}

/// One limit's counters: the window they count in, its count, and the count of the window
/// before it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub window: i64,
    pub current: u64,
    pub previous: u64,
}

impl Tail {
    /// The counters as they stand at `now`, for windows of `duration`: moved on by one window
    /// (the current count becomes the previous), or emptied after two. Empty counters sit in the
    /// window of `now`, so that they read exactly as no counters.
    ///
    /// Counters never move back to an older window: a call whose `now` is behind (a host with a
    /// slow clock) is judged at the start of the newer window they are in, so that it never sees
    /// a fresher window than there is and two skewed hosts cannot reset each other's counts.
    pub fn at(self, duration: Micros, now: Micros) -> Tail {
        let window = now.div_euclid(duration);
        let moved = if self.window >= window {
            self
        } else if self.window == window - 1 {
            Tail {
                window,
                current: 0,
                previous: self.current,
            }
        } else {
            Tail::default()
        };
        if moved.is_empty() {
            Tail {
                window,
                ..Tail::default()
            }
        } else {
            moved
        }
    }

    pub fn is_empty(&self) -> bool {
        self.current == 0 && self.previous == 0
    }

    /// Where the window starts.
    fn start(&self, duration: Micros) -> i128 {
        i128::from(self.window) * i128::from(duration)
    }

    /// How far into the window `now` is: 0 for a late call (before the window starts).
    fn elapsed(&self, duration: Micros, now: Micros) -> u128 {
        (i128::from(now) - self.start(duration)).clamp(0, i128::from(duration) - 1) as u128
    }

    /// The weighted count at `now` (of counters as [`at`](Self::at) gives them):
    /// `floor(previous * (duration - elapsed) / duration) + current`.
    pub fn weighted(&self, duration: Micros, now: Micros) -> u128 {
        let d = duration as u128;
        let share = d - self.elapsed(duration, now);
        u128::from(self.previous) * share / d + u128::from(self.current)
    }

    /// The earliest instant from `now` on at which the weighted count is at most `most`, nothing
    /// else happening. The count only falls with time (within a window the previous one's share
    /// shrinks; at the next window's start the current count becomes that share, whole), so the
    /// instants where it is at most `most` are all those from this one on.
    fn earliest(&self, duration: Micros, most: u64, now: Micros) -> i128 {
        let d = duration as u128;
        let start = self.start(duration);
        // In this window, once the previous window's share has shrunk enough.
        if self.current <= most {
            let Some(share) = largest_share(self.previous, most - self.current, d) else {
                return i128::from(now);
            };
            let needed = d.saturating_sub(share);
            if needed <= self.elapsed(duration, now) {
                return i128::from(now);
            }
            if needed < d {
                return start + needed as i128;
            }
        }
        // In the next one, where this window's count is the previous share, falling from whole.
        let next = start + i128::from(duration);
        match largest_share(self.current, most, d) {
            None => next,
            Some(share) if share >= 1 => next + d.saturating_sub(share) as i128,
            // In the one after, where everything is forgotten.
            Some(_) => next + i128::from(duration),
        }
    }
}

/// The largest part `share` of a window of `d` for which `floor(count * share / d) <= spare`,
/// that is `count * share < (spare + 1) * d`; `None` when any part is (a count of 0).
fn largest_share(count: u64, spare: u64, d: u128) -> Option<u128> {
    (count > 0).then(|| ((u128::from(spare) + 1) * d).div_ceil(u128::from(count)) - 1)
}

/// Reads the counts of [`Tails::counts_at`] (or of the Lua reply): per identifier and limit,
/// window, current and previous. `None` when there are not `ids` identifiers' worth.
pub fn tails_of(limiter: &SlidingTail, ids: usize, counts: &[u64]) -> Option<Vec<Tail>> {
    if counts.len() != ids * limiter.limits().len() * COUNTS_PER_LIMIT {
        return None;
    }
    counts
        .chunks_exact(COUNTS_PER_LIMIT)
        .map(|c| {
            Some(Tail {
                window: i64::try_from(c[0]).ok()?,
                current: c[1],
                previous: c[2],
            })
        })
        .collect()
}

/// One identifier's counters, one [`Tail`] per limit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tails {
    per_limit: Vec<Tail>,
}

impl Tails {
    fn tail(&self, limiter: &SlidingTail, j: usize, now: Micros) -> Tail {
        let duration = limiter.limits()[j].duration;
        self.per_limit
            .get(j)
            .copied()
            .unwrap_or_default()
            .at(duration, now)
    }

    /// The counters at `now`, per limit window, current and previous, appended to `into`.
    pub fn counts_at(&self, limiter: &SlidingTail, now: Micros, into: &mut Vec<u64>) {
        for j in 0..limiter.limits().len() {
            let tail = self.tail(limiter, j, now);
            into.extend([tail.window as u64, tail.current, tail.previous]);
        }
    }

    /// Counts `weight` in every limit's current window (or the newer one its counters are in).
    pub fn add(&mut self, limiter: &SlidingTail, weight: u64, now: Micros) {
        self.per_limit = (0..limiter.limits().len())
            .map(|j| {
                let tail = self.tail(limiter, j, now);
                Tail {
                    current: tail.current + weight,
                    ..tail
                }
            })
            .collect();
    }

    /// Gives `weight` back to every limit: from the current window's count first, then from the
    /// previous one's, never below zero. Returns `true` when nothing counts any more.
    pub fn reward(&mut self, limiter: &SlidingTail, weight: u64, now: Micros) -> bool {
        for j in 0..self.per_limit.len().min(limiter.limits().len()) {
            let mut tail = self.tail(limiter, j, now);
            let from_current = weight.min(tail.current);
            tail.current -= from_current;
            tail.previous = tail.previous.saturating_sub(weight - from_current);
            self.per_limit[j] = tail.at(limiter.limits()[j].duration, now);
        }
        self.is_idle(limiter, now)
    }

    /// True when no limit's counters hold anything at `now` any more.
    pub fn is_idle(&self, limiter: &SlidingTail, now: Micros) -> bool {
        (0..self.per_limit.len()).all(|j| self.tail(limiter, j, now).is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;
    const MINUTE: Micros = 60 * SECOND;

    fn limiter(limits: &[(f64, f64)]) -> SlidingTail {
        SlidingTail::new(limits).unwrap()
    }

    fn tails_at(limiter: &SlidingTail, ids: &[&mut Tails], now: Micros) -> Vec<Tail> {
        let mut counts = Vec::new();
        for state in ids {
            state.counts_at(limiter, now, &mut counts);
        }
        tails_of(limiter, ids.len(), &counts).unwrap()
    }

    /// A memory store: judge, and count when allowed.
    fn consume(limiter: &SlidingTail, ids: &mut [&mut Tails], weight: u64, now: Micros) -> Verdict {
        let verdict = limiter.judge(&tails_at(limiter, ids, now), weight, now, true);
        if verdict.allowed {
            for state in ids.iter_mut() {
                state.add(limiter, weight, now);
            }
        }
        verdict
    }

    fn peek(limiter: &SlidingTail, state: &mut Tails, weight: u64, now: Micros) -> Verdict {
        limiter.judge(&tails_at(limiter, &[state], now), weight, now, false)
    }

    fn answer(v: Verdict) -> (bool, Micros, u64, Micros) {
        (v.allowed, v.time_left, v.remaining, v.reset_after)
    }

    #[test]
    fn the_seeds_table_three_per_minute() {
        let w = limiter(&[(60_000.0, 3.0)]);
        let mut s = Tails::default();
        // 12:00:00 is a window start; (minute, second, allowed, time left, remaining, reset).
        let noon = 1_515_120_000 * SECOND;
        let rows = [
            // No previous window. A count of 1 weighs 0 from 1 µs into the next window
            // (floor(1 * (60 s - 1 µs) / 60 s) = 0); 2 once less than half of it is left.
            (0, 5, true, 0, 2, 55 * SECOND + 1),
            (0, 15, true, 0, 1, 75 * SECOND + 1),
            // floor(2 * 59 / 60) = 1, + 0 + 1 = 2.
            (1, 1, true, 0, 1, 59 * SECOND + 1),
            // floor(2 * 50 / 60) = 1, + 1 + 1 = 3.
            (1, 10, true, 0, 0, 80 * SECOND + 1),
            // floor(2 * 20 / 60) = 0, + 2 + 1 = 3.
            (1, 40, true, 0, 0, 60 * SECOND + 1),
            // floor(2 * 10 / 60) = 0, + 3 + 1 = 4 > 3. In this window the count is never below
            // 3; at 12:02:00 it is floor(3 * 60 / 60) = 3, and 2 from 1 µs later.
            (1, 50, false, 10 * SECOND + 1, 0, 50 * SECOND + 1),
            // floor(3 * 40 / 60) = 2, + 0 + 1 = 3.
            (2, 20, true, 0, 0, 40 * SECOND + 1),
        ];
        for (minute, second, allowed, time_left, remaining, reset) in rows {
            let now = noon + minute * MINUTE + second * SECOND;
            let v = consume(&w, &mut [&mut s], 1, now);
            assert_eq!(
                answer(v),
                (allowed, time_left, remaining, reset),
                "{minute}:{second}"
            );
        }
        assert!(!peek(&w, &mut s, 1, noon + 2 * MINUTE).allowed);
        // The next needs floor(3 * rem / 60 s) <= 1: rem < 40 s, from 12:02:20 and 1 µs.
        assert_eq!(
            peek(&w, &mut s, 1, noon + 2 * MINUTE + 20 * SECOND).time_left,
            1
        );
    }

    #[test]
    fn the_worst_case_is_twice_the_limit_in_one_duration() {
        // All of a window's weight at its last microsecond, then the next window fills as its
        // share falls: 20 pass within 900 ms and 2 µs, for a limit of 10 per second.
        let w = limiter(&[(1000.0, 10.0)]);
        let mut s = Tails::default();
        assert!(consume(&w, &mut [&mut s], 10, SECOND - 1).allowed);
        let refused = consume(&w, &mut [&mut s], 1, SECOND);
        assert_eq!(answer(refused), (false, 1, 0, 900 * MS + 1));
        // floor(10 * 999_999 / 1_000_000) = 9.
        assert_eq!(
            answer(consume(&w, &mut [&mut s], 1, SECOND + 1)),
            (true, 0, 0, SECOND)
        );
        // floor(10 * rem / 1 s) = 0 once rem < 100 ms: from 1.9 s and 1 µs, 9 more fit.
        assert!(!peek(&w, &mut s, 9, 1900 * MS).allowed);
        assert_eq!(peek(&w, &mut s, 9, 1900 * MS).time_left, 1);
        assert!(consume(&w, &mut [&mut s], 9, 1900 * MS + 1).allowed);
    }

    #[test]
    fn only_allowed_weight_counts_and_all_ids_must_admit() {
        let w = limiter(&[(1000.0, 3.0)]);
        let (mut ip, mut user) = (Tails::default(), Tails::default());
        assert!(consume(&w, &mut [&mut ip], 3, 0).allowed);
        for _ in 0..5 {
            assert!(!consume(&w, &mut [&mut user, &mut ip], 1, 10).allowed);
        }
        assert!(user.is_idle(&w, 10));
        let never = consume(&w, &mut [&mut user], 4, 10);
        assert_eq!((never.allowed, never.time_left), (false, NEVER));
        assert_eq!(never.remaining, 3);
    }

    #[test]
    fn several_limits_wait_for_the_slowest() {
        let w = limiter(&[(1000.0, 5.0), (10_000.0, 6.0)]);
        let mut s = Tails::default();
        assert!(consume(&w, &mut [&mut s], 5, 0).allowed);
        assert!(consume(&w, &mut [&mut s], 1, 9 * SECOND).allowed);
        // The 10 s window holds 6 until 10 s; from then its share falls by 1 every 10/6 s:
        // floor(6 * rem / 10 s) <= 4 once rem < 8.333 s, from 11.666667 s.
        let v = consume(&w, &mut [&mut s], 2, 9500 * MS);
        assert_eq!((v.allowed, v.limit, v.remaining), (false, 6, 0));
        assert_eq!(v.time_left, 11_666_667 - 9_500_000);
        assert!(!peek(&w, &mut s, 2, 11_666_666).allowed);
        assert!(peek(&w, &mut s, 2, 11_666_667).allowed);
    }

    #[test]
    fn a_late_call_is_judged_at_the_start_of_the_newer_window() {
        let w = limiter(&[(1000.0, 5.0)]);
        let mut s = Tails::default();
        assert!(consume(&w, &mut [&mut s], 3, 500 * MS).allowed);
        // floor(3 * 800 / 1000) = 2, + 0 + 1 = 3.
        assert!(consume(&w, &mut [&mut s], 1, 1200 * MS).allowed);
        // A host 300 ms behind: judged as at 1 s, where all 3 of window 0 count: 3 + 1 + 1 = 5.
        // It counts in window 1.
        assert_eq!(
            answer(consume(&w, &mut [&mut s], 1, 900 * MS)),
            (true, 0, 0, 1600 * MS + 1)
        );
        let mut counts = Vec::new();
        s.counts_at(&w, 900 * MS, &mut counts);
        assert_eq!(counts, [1, 2, 3]);
        // Full at 1 s; 1 µs later floor(3 * 999_999 / 1_000_000) = 2, + 2 + 1 = 5.
        assert_eq!(
            answer(consume(&w, &mut [&mut s], 1, 900 * MS)),
            (false, 100 * MS + 1, 0, 1600 * MS + 1)
        );
        assert!(!peek(&w, &mut s, 1, SECOND).allowed);
        assert!(peek(&w, &mut s, 1, SECOND + 1).allowed);
    }

    #[test]
    fn rewards_take_from_the_current_window_first_and_never_create_state() {
        let w = limiter(&[(1000.0, 10.0), (5000.0, 20.0)]);
        let mut s = Tails::default();
        s.add(&w, 4, 0);
        s.add(&w, 3, SECOND);
        assert!(!s.reward(&w, 5, SECOND));
        let mut counts = Vec::new();
        s.counts_at(&w, SECOND, &mut counts);
        assert_eq!(counts, [1, 0, 2, 0, 2, 0]);
        assert!(s.reward(&w, 100, SECOND));
        let mut none = Tails::default();
        assert!(none.reward(&w, 1, 0));
        assert_eq!(none, Tails::default());
    }

    #[test]
    fn empty_counters_read_as_no_counters() {
        let w = limiter(&[(1000.0, 2.0)]);
        let mut s = Tails::default();
        s.add(&w, 1, 5 * SECOND);
        s.reward(&w, 1, 5 * SECOND);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // Even for a late call, which would otherwise be judged in window 5.
        s.counts_at(&w, 4 * SECOND, &mut a);
        Tails::default().counts_at(&w, 4 * SECOND, &mut b);
        assert_eq!(a, b);
        s.add(&w, 1, 6 * SECOND);
        assert!(!s.is_idle(&w, 7 * SECOND + 999_999));
        assert!(s.is_idle(&w, 8 * SECOND));
    }

    #[test]
    fn huge_counts_and_durations_stay_exact() {
        // 1e15 per 1e12 ms: products near 1e30.
        let w = limiter(&[(1e12, 1e15)]);
        let d = 1_000_000_000_000_000i64;
        let mut s = Tails::default();
        assert!(consume(&w, &mut [&mut s], 999_999_999_999_999, d - 1).allowed);
        // floor(999_999_999_999_999 * (d - 1) / d) = 999_999_999_999_998: 2 fit at 1 µs in.
        assert!(!peek(&w, &mut s, 2, d).allowed);
        assert!(peek(&w, &mut s, 2, d + 1).allowed);
        assert!(!peek(&w, &mut s, 3, d + 1).allowed);
        assert_eq!(peek(&w, &mut s, 3, d).time_left, 2);
    }

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n
        }
    }

    #[test]
    fn earliest_is_the_first_instant_that_admits() {
        // Brute force over every microsecond, with tiny windows, late calls included.
        let mut rng = Rng(7);
        for _ in 0..3000 {
            let duration = 1 + rng.below(40) as Micros;
            let limit = 1 + rng.below(12);
            let stored = Tail {
                window: 5 + rng.below(3) as i64,
                current: rng.below(limit + 1),
                previous: rng.below(limit + 1),
            };
            let now = (4 + rng.below(3) as i64) * duration + rng.below(duration as u64) as i64;
            let most = rng.below(limit + 1);
            let weighted_at = |t: Micros| stored.at(duration, t).weighted(duration, t);
            let first = (now..)
                .find(|&t| weighted_at(t) <= u128::from(most))
                .unwrap();
            let tail = stored.at(duration, now);
            assert_eq!(
                tail.earliest(duration, most, now),
                i128::from(first),
                "{stored:?} d {duration} now {now} most {most}"
            );
            // And allowed from then on.
            for t in first..first + 3 * duration {
                assert!(weighted_at(t) <= u128::from(most));
            }
        }
    }

    #[test]
    fn uniform_traffic_against_an_exact_sliding_log() {
        // Requests at random instants, at 1.5 to 3 times the limit's rate: compare what any
        // interval of one duration admits with the limit (which an exact sliding log never
        // passes). See the README for the measured figures.
        let w = limiter(&[(1000.0, 100.0)]);
        let mut rng = Rng(11);
        for rate in [150, 200, 300] {
            let mut s = Tails::default();
            let mut admitted = Vec::new();
            let mut now = 0;
            while now < 200 * SECOND {
                now += 1 + rng.below(2 * SECOND as u64 / rate) as Micros;
                if consume(&w, &mut [&mut s], 1, now).allowed {
                    admitted.push(now);
                }
            }
            let most = (0..admitted.len())
                .map(|i| admitted[i..].partition_point(|&t| t < admitted[i] + SECOND))
                .max()
                .unwrap();
            // The limit's rate on the whole, and a little over it in the heaviest second.
            assert!(
                admitted.len() <= 200 * 100 + 100,
                "rate {rate}: {}",
                admitted.len()
            );
            assert!((100..=103).contains(&most), "rate {rate}: {most}");
        }
    }

    #[test]
    fn options_are_those_of_the_fixed_window() {
        assert!(SlidingTail::new(&[]).is_err());
        let err = SlidingTail::new(&[(1000.0, 1.0), (0.0004, 1.0)]).unwrap_err();
        assert!(
            err.message.contains("`limits[1].duration`"),
            "{}",
            err.message
        );
        let err = SlidingTail::new(&[(1000.0, 2.5)]).unwrap_err();
        assert!(err.message.contains("`limits[0].limit`"), "{}", err.message);
    }
}
