//! The leaky bucket as a meter (the seed's "Leaky Bucket"): per identifier, a bucket of
//! `capacity` that each allowed action fills by its weight, and that leaks `leak_amount` every
//! `leak_interval`. An action is allowed when it fits in the bucket.
//!
//! The leaks keep their phase: a bucket started at `ts` leaks at `ts + I`, `ts + 2I`, ... and a
//! drain moves `ts` forward by whole intervals only, so no fraction of an interval is lost to
//! when the calls come. A bucket that drains to empty is forgotten: the next allowed action
//! starts a new one at its own instant, so an empty bucket and no bucket answer alike (in memory,
//! where sweeps drop idle buckets, and on Redis, where keys expire).
//!
//! Pure: no I/O, time is an argument. [`Bucket`] is one identifier's state in memory;
//! `lua/leaky_bucket.lua` keeps the same two numbers in a Redis hash, and both judge through
//! [`LeakyBucket::judge`].

use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{duration_option, Micros};
use crate::verdict::{Tally, Verdict, NEVER};

/// Every instant the script computes stays below this: exact in a Lua double.
const EXACT_IN_DOUBLES: u128 = 1 << 53;

/// A validated leaky bucket: `capacity` weight, leaking `leak_amount` every `leak_interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    capacity: u64,
    leak_amount: u64,
    leak_interval: Micros,
}

/// One identifier's bucket: its `level` and the instant `ts` of its last leak (or of its start).
/// A level of 0 is no bucket.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub level: u64,
    pub ts: Micros,
}

impl LeakyBucket {
    /// Validates the options: `capacity` and `leak_amount` whole numbers from 1 to 1e15,
    /// `leak_interval_ms` > 0 (a whole number of microseconds, at most 1e12 ms), and the time to
    /// drain a full bucket (`ceil(capacity / leak_amount) * leak_interval`) below 2^53 µs.
    pub fn new(capacity: f64, leak_amount: f64, leak_interval_ms: f64) -> Outcome<Self> {
        let bucket = Self {
            capacity: count_option("capacity", capacity, 1.0)?,
            leak_amount: count_option("leakAmount", leak_amount, 1.0)?,
            leak_interval: duration_option("leakInterval", leak_interval_ms, 0.0, true)?,
        };
        let drain_time =
            u128::from(bucket.leaks_to_empty(bucket.capacity)) * bucket.leak_interval as u128;
        if drain_time >= EXACT_IN_DOUBLES {
            return Err(Failure::range_error(
                ErrorCode::InvalidOption,
                format!(
                    "`capacity`, `leakAmount` and `leakInterval` give {drain_time} µs to drain a \
                     full bucket (ceil(capacity / leakAmount) * leakInterval); it must stay below \
                     2^53 µs (about 285 years)"
                ),
            ));
        }
        Ok(bucket)
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn leak_amount(&self) -> u64 {
        self.leak_amount
    }

    pub fn leak_interval(&self) -> Micros {
        self.leak_interval
    }

    /// How long a full bucket takes to drain: how long a bucket may matter after a write.
    pub fn drain_time(&self) -> Micros {
        self.leaks_to_empty(self.capacity) as Micros * self.leak_interval
    }

    /// How many leaks empty a bucket holding `level`.
    fn leaks_to_empty(&self, level: u64) -> u64 {
        level.div_ceil(self.leak_amount)
    }

    /// When `leaks` leaks after `ts` have happened, as a duration from `now` (clamped below
    /// [`NEVER`]: only foreign data can come near it).
    fn after_leaks(&self, ts: Micros, leaks: u64, now: Micros) -> Micros {
        let at = i128::from(ts) + i128::from(leaks) * i128::from(self.leak_interval);
        (at - i128::from(now)).clamp(0, i128::from(NEVER - 1)) as Micros
    }

    /// The verdict on adding `weight` at `now` to buckets already drained to `now` (one per
    /// identifier; a level of 0 is an empty bucket). With `charge` an allowed weight is in
    /// `remaining` and `reset_after` (a consume); without, they are those of now (a peek).
    pub fn judge(&self, buckets: &[Bucket], weight: u64, now: Micros, charge: bool) -> Verdict {
        let mut allowed = true;
        let mut time_left: Micros = 0;
        for bucket in buckets {
            if weight > self.capacity {
                allowed = false;
                time_left = NEVER;
            } else if bucket.level + weight > self.capacity {
                allowed = false;
                let excess = bucket.level + weight - self.capacity;
                let wait = self.after_leaks(bucket.ts, self.leaks_to_empty(excess), now);
                time_left = time_left.max(wait);
            }
        }
        let added = if allowed && charge { weight } else { 0 };
        let mut tally = Tally::default();
        for bucket in buckets {
            let mut after = *bucket;
            after.fill(added, now);
            let reset_after = if after.level == 0 {
                0
            } else {
                self.after_leaks(after.ts, self.leaks_to_empty(after.level), now)
            };
            tally.add(self.capacity, after.level, reset_after);
        }
        tally.verdict(allowed, time_left)
    }
}

impl Bucket {
    /// The bucket at `now`: the leaks due since `ts` taken out, `ts` moved to the last of them.
    /// Empty (and restarted at `now`) when they empty it. A late call (`now` before `ts`) drains
    /// nothing.
    pub fn at(self, bucket: &LeakyBucket, now: Micros) -> Bucket {
        let empty = Bucket { level: 0, ts: now };
        if self.level == 0 {
            return empty;
        }
        let elapsed = now.saturating_sub(self.ts);
        if elapsed < bucket.leak_interval {
            return self;
        }
        let leaks = (elapsed / bucket.leak_interval) as u64;
        if leaks >= bucket.leaks_to_empty(self.level) {
            return empty;
        }
        // leaks < ceil(level / leak_amount): the product is below level, no overflow.
        Bucket {
            level: self.level - leaks * bucket.leak_amount,
            ts: self.ts + leaks as Micros * bucket.leak_interval,
        }
    }

    /// Adds `weight` to a bucket already drained to `now`: an empty one starts at `now`.
    fn fill(&mut self, weight: u64, now: Micros) {
        if weight == 0 {
            return;
        }
        if self.level == 0 {
            self.ts = now;
        }
        self.level += weight;
    }

    /// Charges an allowed `weight` at `now`.
    pub fn add(&mut self, bucket: &LeakyBucket, weight: u64, now: Micros) {
        *self = self.at(bucket, now);
        self.fill(weight, now);
    }

    /// Gives `weight` back at `now`, never below empty. Returns `true` when the bucket is empty.
    pub fn reward(&mut self, bucket: &LeakyBucket, weight: u64, now: Micros) -> bool {
        *self = self.at(bucket, now);
        self.level = self.level.saturating_sub(weight);
        self.level == 0
    }

    /// True when the bucket is empty at `now` (the memory store asks this a clock skew before
    /// the newest call, so that a slightly late call still finds what Redis would show it).
    pub fn is_idle(&self, bucket: &LeakyBucket, now: Micros) -> bool {
        self.at(bucket, now).level == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;
    /// 12:00:00 of the seed's table, on a minute boundary.
    const NOON: Micros = 1_515_153_600 * SECOND;

    fn bucket(capacity: f64, leak_amount: f64, leak_interval_ms: f64) -> LeakyBucket {
        LeakyBucket::new(capacity, leak_amount, leak_interval_ms).unwrap()
    }

    /// A memory store: drain, judge, and charge when allowed.
    fn consume(lb: &LeakyBucket, ids: &mut [&mut Bucket], weight: u64, now: Micros) -> Verdict {
        let drained: Vec<Bucket> = ids.iter().map(|b| b.at(lb, now)).collect();
        let verdict = lb.judge(&drained, weight, now, true);
        if verdict.allowed {
            for b in ids.iter_mut() {
                b.add(lb, weight, now);
            }
        }
        verdict
    }

    fn peek(lb: &LeakyBucket, b: &Bucket, weight: u64, now: Micros) -> Verdict {
        lb.judge(&[b.at(lb, now)], weight, now, false)
    }

    fn verdict(
        allowed: bool,
        time_left: Micros,
        remaining: u64,
        limit: u64,
        reset_after: Micros,
    ) -> Verdict {
        Verdict {
            allowed,
            time_left,
            remaining,
            limit,
            reset_after,
        }
    }

    #[test]
    fn the_seeds_table_with_the_phase_kept() {
        // A bucket of 3 leaking 1 per 20 s.
        let lb = bucket(3.0, 1.0, 20_000.0);
        let mut b = Bucket::default();
        let at = |s: Micros| NOON + s * SECOND;
        // 12:00:05: a new bucket, ts = 12:00:05; empty again at 12:00:25.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(5)),
            verdict(true, 0, 2, 3, 20 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 1,
                ts: at(5)
            }
        );
        // 12:00:15: no leak yet (the first is at 12:00:25); 2 leaks to go, at 12:00:45.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(15)),
            verdict(true, 0, 1, 3, 30 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: at(5)
            }
        );
        // 12:01:01: 56 s = 2 leaks (12:00:25, 12:00:45) empty it; a new bucket at 12:01:01.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(61)),
            verdict(true, 0, 2, 3, 20 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 1,
                ts: at(61)
            }
        );
        // 12:01:10: no leak (next at 12:01:21).
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(70)),
            verdict(true, 0, 1, 3, 31 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: at(61)
            }
        );
        // 12:01:40: one leak, at 12:01:21 (the next is at 12:01:41): 2 - 1 + 1.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(100)),
            verdict(true, 0, 1, 3, 21 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: at(81)
            }
        );
        // 12:01:50: the leak at 12:01:41: 2 - 1 + 1.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(110)),
            verdict(true, 0, 1, 3, 31 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: at(101)
            }
        );
        // 12:02:20: the leak at 12:02:01 (the next at 12:02:21): 2 - 1 + 1.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, at(140)),
            verdict(true, 0, 1, 3, 21 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: at(121)
            }
        );
        // Two more do not fit before the leak at 12:02:21.
        assert_eq!(
            consume(&lb, &mut [&mut b], 2, at(140)),
            verdict(false, SECOND, 1, 3, 21 * SECOND)
        );
        assert!(consume(&lb, &mut [&mut b], 2, at(141)).allowed);
    }

    #[test]
    fn a_burst_waits_for_exactly_the_leaks_it_needs() {
        let lb = bucket(3.0, 1.0, 20_000.0);
        let mut b = Bucket::default();
        assert_eq!(
            consume(&lb, &mut [&mut b], 3, NOON),
            verdict(true, 0, 0, 3, 60 * SECOND)
        );
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, NOON + SECOND),
            verdict(false, 19 * SECOND, 0, 3, 59 * SECOND)
        );
        assert_eq!(peek(&lb, &b, 1, NOON + 20 * SECOND - 1).time_left, 1);
        assert_eq!(
            peek(&lb, &b, 2, NOON + 20 * SECOND - 1).time_left,
            20 * SECOND + 1
        );
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, NOON + 20 * SECOND),
            verdict(true, 0, 0, 3, 60 * SECOND)
        );
        assert_eq!(
            b,
            Bucket {
                level: 3,
                ts: NOON + 20 * SECOND
            }
        );
        // Above the capacity: never, and nothing is charged.
        let never = consume(&lb, &mut [&mut b], 4, NOON + 30 * SECOND);
        assert_eq!(never, verdict(false, NEVER, 0, 3, 50 * SECOND));
        assert_eq!(
            b,
            Bucket {
                level: 3,
                ts: NOON + 20 * SECOND
            }
        );
    }

    #[test]
    fn a_leak_amount_above_one_empties_a_partial_bucket_in_one_leak() {
        // 10, leaking 4 per second.
        let lb = bucket(10.0, 4.0, 1000.0);
        let mut b = Bucket::default();
        assert_eq!(
            consume(&lb, &mut [&mut b], 10, NOON),
            verdict(true, 0, 0, 10, 3 * SECOND)
        );
        // 5 more need ceil(5 / 4) = 2 leaks: at NOON + 2 s.
        assert_eq!(
            consume(&lb, &mut [&mut b], 5, NOON + 500 * MS),
            verdict(false, 1500 * MS, 0, 10, 2500 * MS)
        );
        // At NOON + 1 s the level is 6: 5 need one more leak, 4 fit.
        assert_eq!(
            consume(&lb, &mut [&mut b], 5, NOON + SECOND),
            verdict(false, SECOND, 4, 10, 2 * SECOND)
        );
        assert_eq!(
            consume(&lb, &mut [&mut b], 4, NOON + SECOND),
            verdict(true, 0, 0, 10, 3 * SECOND)
        );
        // NOON + 3.2 s: leaks at 2 s and 3 s take 8: level 2, then 3.
        assert_eq!(
            consume(&lb, &mut [&mut b], 1, NOON + 3200 * MS),
            verdict(true, 0, 7, 10, 800 * MS)
        );
        assert_eq!(
            b,
            Bucket {
                level: 3,
                ts: NOON + 3 * SECOND
            }
        );
        // The leak at 4 s takes the 3 left: empty.
        assert_eq!(
            peek(&lb, &b, 1, NOON + 4 * SECOND),
            verdict(true, 0, 10, 10, 0)
        );
        assert!(b.is_idle(&lb, NOON + 4 * SECOND));
        assert!(!b.is_idle(&lb, NOON + 4 * SECOND - 1));
    }

    #[test]
    fn an_idle_gap_of_days_empties_the_bucket_exactly() {
        let lb = bucket(1e15, 1e15, 0.001);
        let mut b = Bucket::default();
        assert!(consume(&lb, &mut [&mut b], 1_000_000_000_000_000, NOON).allowed);
        assert_eq!(peek(&lb, &b, 1, NOON).time_left, 1);
        let later = NOON + 3 * 86_400 * SECOND + 7;
        assert_eq!(
            b.at(&lb, later),
            Bucket {
                level: 0,
                ts: later
            }
        );
        let v = consume(&lb, &mut [&mut b], 1_000_000_000_000_000, later);
        assert_eq!(v, verdict(true, 0, 0, 1_000_000_000_000_000, 1));
        assert_eq!(
            b,
            Bucket {
                level: 1_000_000_000_000_000,
                ts: later
            }
        );
    }

    #[test]
    fn a_late_call_drains_nothing() {
        let lb = bucket(3.0, 1.0, 20_000.0);
        let mut b = Bucket::default();
        assert!(consume(&lb, &mut [&mut b], 3, NOON + 40 * SECOND).allowed);
        // Half a second behind: the bucket is as it was at its ts.
        let late = consume(&lb, &mut [&mut b], 1, NOON + 39_500 * MS);
        assert_eq!(late, verdict(false, 20_500 * MS, 0, 3, 60_500 * MS));
        // A late call that fits is charged without moving ts back.
        let mut c = Bucket {
            level: 1,
            ts: NOON + 30 * SECOND,
        };
        assert_eq!(
            consume(&lb, &mut [&mut c], 1, NOON + 25 * SECOND),
            verdict(true, 0, 1, 3, 45 * SECOND)
        );
        assert_eq!(
            c,
            Bucket {
                level: 2,
                ts: NOON + 30 * SECOND
            }
        );
    }

    #[test]
    fn several_ids_are_charged_together_or_not_at_all() {
        let lb = bucket(2.0, 1.0, 1000.0);
        let (mut ip, mut user) = (Bucket::default(), Bucket::default());
        assert!(consume(&lb, &mut [&mut ip], 2, 0).allowed);
        let v = consume(&lb, &mut [&mut user, &mut ip], 1, 10);
        assert_eq!(v, verdict(false, SECOND - 10, 0, 2, 2 * SECOND - 10));
        assert_eq!(user, Bucket::default());
        let v = consume(&lb, &mut [&mut user, &mut ip], 1, SECOND);
        assert_eq!(v, verdict(true, 0, 0, 2, 2 * SECOND));
    }

    #[test]
    fn a_reward_drains_first_and_never_goes_below_empty() {
        let lb = bucket(5.0, 1.0, 1000.0);
        let mut b = Bucket::default();
        b.add(&lb, 5, 0);
        assert!(!b.reward(&lb, 2, 1500 * MS));
        assert_eq!(
            b,
            Bucket {
                level: 2,
                ts: SECOND
            }
        );
        assert!(b.reward(&lb, 10, 1500 * MS));
    }

    /// The exact wait: refused one microsecond before `time_left`, allowed at it.
    #[test]
    fn time_left_is_exact() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..2000 {
            let lb = bucket(
                1.0 + next(20) as f64,
                1.0 + next(5) as f64,
                1.0 + next(3000) as f64 / 7.0,
            );
            let mut b = Bucket::default();
            let mut now = NOON + next(1_000_000) as Micros;
            for _ in 0..8 {
                consume(&lb, &mut [&mut b], 1 + next(lb.capacity()), now);
                now += next(2 * lb.leak_interval() as u64) as Micros;
            }
            let weight = 1 + next(lb.capacity());
            let v = peek(&lb, &b, weight, now);
            if !v.allowed {
                assert!(!peek(&lb, &b, weight, now + v.time_left - 1).allowed);
                assert!(peek(&lb, &b, weight, now + v.time_left).allowed);
            }
        }
    }

    /// Admitted weight in every window of `t` µs, with calls in time order.
    fn most_admitted_in(log: &[(Micros, u64)], t: Micros) -> u64 {
        log.iter()
            .map(|&(start, _)| {
                log.iter()
                    .filter(|&&(at, _)| at >= start && at <= start + t)
                    .map(|&(_, w)| w)
                    .sum()
            })
            .max()
            .unwrap_or(0)
    }

    /// A greedy client on `b`: at every microsecond from `from` to `to`, weight 1 until refused.
    fn greedy(lb: &LeakyBucket, b: &mut Bucket, from: Micros, to: Micros) -> Vec<(Micros, u64)> {
        let mut log = Vec::new();
        for now in from..=to {
            while consume(lb, &mut [&mut *b], 1, now).allowed {
                log.push((now, 1));
            }
        }
        log
    }

    #[test]
    fn the_bound_holds_in_time_order_and_is_reached() {
        // capacity + leak_amount * ceil(t / I), with capacity 6, 3 per 10 µs.
        let lb = bucket(6.0, 3.0, 0.01);
        let bound = |t: Micros| 6 + 3 * (t as u64).div_ceil(10);
        // A fresh bucket fills at 0 and leaks at 10, 20, ...: the bound is reached when t is a
        // multiple of the interval.
        let log = greedy(&lb, &mut Bucket::default(), 0, 200);
        for t in [1, 9, 10, 11, 19, 20, 25, 100] {
            let most = most_admitted_in(&log, t);
            assert!(most <= bound(t), "t = {t}");
            assert_eq!(most == bound(t), t % 10 == 0, "t = {t}");
        }
        // A bucket holding 1 since -9 µs leaks at 1, 11, ...: one short of the bound otherwise.
        let mut b = Bucket::default();
        b.add(&lb, 1, -9);
        let log = greedy(&lb, &mut b, 0, 200);
        for t in [1, 9, 11, 19, 25, 101] {
            assert_eq!(most_admitted_in(&log, t), bound(t) - 1, "t = {t}");
        }
    }

    #[test]
    fn late_calls_can_pass_the_in_order_bound_by_up_to_a_leak() {
        // capacity 6, 3 per 10 s. The in-order bound for 10 s is 6 + 3 = 9.
        let lb = bucket(6.0, 3.0, 10_000.0);
        let mut b = Bucket::default();
        // A bucket of 1 started at -9 s: it leaks at 1 s, 11 s, ...
        b.add(&lb, 1, -9 * SECOND);
        let mut admitted_in_window = 0;
        assert!(consume(&lb, &mut [&mut b], 5, 0).allowed);
        admitted_in_window += 5;
        assert!(consume(&lb, &mut [&mut b], 3, SECOND).allowed);
        admitted_in_window += 3;
        // Out of [0, 10 s]: the leak at 11 s is credited...
        assert!(consume(&lb, &mut [&mut b], 1, 11 * SECOND).allowed);
        // ... and a call 1 s late, back in the window, uses the rest of it.
        assert!(consume(&lb, &mut [&mut b], 2, 10 * SECOND).allowed);
        admitted_in_window += 2;
        assert_eq!(admitted_in_window, 10);
        // Within capacity + leak_amount * ceil((t + lateness) / I) = 6 + 3 * 2.
        assert!(admitted_in_window <= 6 + 3 * 2);
    }

    #[test]
    fn options_are_validated() {
        for ((capacity, amount, interval), name) in [
            ((0.0, 1.0, 1000.0), "`capacity`"),
            ((1.5, 1.0, 1000.0), "`capacity`"),
            ((1e16, 1.0, 1000.0), "`capacity`"),
            ((3.0, 0.0, 1000.0), "`leakAmount`"),
            ((3.0, 2.5, 1000.0), "`leakAmount`"),
            ((3.0, 1.0, 0.0), "`leakInterval`"),
            ((3.0, 1.0, 0.0004), "`leakInterval`"),
            ((3.0, 1.0, 2e12), "`leakInterval`"),
            ((3.0, 1.0, f64::NAN), "`leakInterval`"),
            ((1e15, 1.0, 0.01), "`leakInterval`"),
            ((10.0, 1.0, 1e12), "`leakAmount`"),
        ] {
            let err = LeakyBucket::new(capacity, amount, interval).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains(name), "{}", err.message);
        }
        // The longest drain that stays exact: 9 leaks of 1e12 ms, and 1e15 leaks of 9 µs.
        assert_eq!(
            bucket(9.0, 1.0, 1e12).drain_time(),
            9 * 1_000_000_000_000_000
        );
        assert_eq!(
            bucket(1e15, 1.0, 0.009).drain_time(),
            9 * 1_000_000_000_000_000
        );
        assert_eq!(
            bucket(10.0, 2.0, 1e12).drain_time(),
            5 * 1_000_000_000_000_000
        );
    }
}
