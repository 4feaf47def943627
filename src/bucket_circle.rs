//! redback's `RateLimit` (Chris O'Hara, 2011): per subject, a circle of `bucket_span /
//! bucket_interval` buckets; the bucket of time `t` is `floor((t % bucket_span) /
//! bucket_interval)`. `add` counts in the current bucket (and, as redback does, empties the two
//! buckets ahead); `count(interval)` sums the current bucket and the `floor(interval /
//! bucket_interval)` before it.
//!
//! Two faults of redback are fixed without changing its layout, so redback's data keeps counting
//! and redback can read ours:
//! - after a pause shorter than `subject_expiry` (the key survives) but longer than two buckets,
//!   redback counts buckets of an earlier lap of the circle again. We remember the absolute
//!   bucket of the last `add` (field `last`, which redback never reads): `add` empties every
//!   bucket skipped since, and `count` only sums buckets written since the last lap.
//! - `count` with `interval > bucket_span` sums some buckets twice; here it is a `RangeError`.
//!
//! Pure: no I/O, time is an argument. [`Circle`] is one subject's state in memory;
//! `lua/bucket_circle.lua` keeps the same circle in redback's Redis hash.

use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::Micros;

const SECOND: Micros = 1_000_000;

/// A validated redback configuration (seconds, as redback takes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketCircle {
    span: Micros,
    interval: Micros,
    buckets: i64,
    /// Seconds an idle subject is kept.
    pub expiry_seconds: i64,
}

impl BucketCircle {
    /// `bucket_span` (default 600), `bucket_interval` (default 5) and `subject_expiry` (default
    /// 1200), in whole seconds. The span must be a multiple of the interval (redback's circle
    /// is inconsistent otherwise) and hold 3 to 100,000 buckets.
    pub fn new(span_s: f64, interval_s: f64, expiry_s: f64) -> Outcome<Self> {
        let whole = |name: &str, value: f64| {
            if value.fract() != 0.0 || !(1.0..=31_536_000.0).contains(&value) {
                return Err(Failure::range_error(
                    ErrorCode::InvalidOption,
                    format!("`{name}` must be a whole number of seconds from 1 to 31536000, got {value}"),
                ));
            }
            Ok(value as i64)
        };
        let (span, interval) = (
            whole("bucket_span", span_s)?,
            whole("bucket_interval", interval_s)?,
        );
        let expiry = whole("subject_expiry", expiry_s)?;
        // An add empties the two buckets ahead of the current one (redback's way of clearing the
        // next lap): with fewer than 3 buckets, those are the current one, and counts are lost.
        if span % interval != 0 || !(3..=100_000).contains(&(span / interval)) {
            return Err(Failure::range_error(
                ErrorCode::InvalidOption,
                format!(
                    "`bucket_span` ({span}) must be a multiple of `bucket_interval` ({interval}) \
                     making from 3 to 100000 buckets"
                ),
            ));
        }
        Ok(Self {
            span: span * SECOND,
            interval: interval * SECOND,
            buckets: span / interval,
            expiry_seconds: expiry,
        })
    }

    pub fn span(&self) -> Micros {
        self.span
    }

    pub fn interval(&self) -> Micros {
        self.interval
    }

    pub fn buckets(&self) -> i64 {
        self.buckets
    }

    /// redback's bucket (hash field) of an instant.
    pub fn field(&self, now: Micros) -> i64 {
        now.rem_euclid(self.span) / self.interval
    }

    /// The absolute bucket of an instant: `field` is this modulo the bucket count.
    pub fn absolute(&self, now: Micros) -> i64 {
        now.div_euclid(self.interval)
    }

    /// How many buckets before the current one `count(interval)` sums, as redback:
    /// `floor(interval / bucket_interval)`, but at most the whole circle once (redback sums the
    /// current bucket twice when `interval` is the span). An interval longer than the span is a
    /// `RangeError`.
    pub fn lookback(&self, interval_s: f64) -> Outcome<i64> {
        if !interval_s.is_finite()
            || interval_s < 0.0
            || interval_s * SECOND as f64 > self.span as f64
        {
            return Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                format!(
                    "`interval` must be from 0 to bucket_span ({} s) seconds, got {interval_s}; \
                     longer intervals would count buckets twice",
                    self.span / SECOND
                ),
            ));
        }
        let lookback = (interval_s / (self.interval / SECOND) as f64).floor() as i64;
        Ok(lookback.min(self.buckets - 1))
    }

    /// The absolute buckets that `count` sums at `now`: the current one and `lookback` before
    /// it, except those not written since the last lap. `last` is the absolute bucket of the
    /// last `add`; `None` for data written by redback itself, which is summed as redback does.
    pub fn counted(
        &self,
        now: Micros,
        lookback: i64,
        last: Option<i64>,
    ) -> std::ops::RangeInclusive<i64> {
        let current = self.absolute(now);
        match last {
            Some(last) => (current - lookback).max(last - self.buckets + 1)..=current.min(last),
            None => (current - lookback)..=current,
        }
    }

    /// The absolute buckets an `add` at `now` empties before counting: every bucket since the
    /// last add (the current one included, when it holds an older lap), and the two ahead.
    pub fn emptied(&self, now: Micros, last: Option<i64>) -> impl Iterator<Item = i64> {
        let current = self.absolute(now);
        // Nothing was skipped when the last add is this bucket (or later, or unknown).
        let first_skipped = match last {
            Some(last) if last < current => (last + 1).max(current - self.buckets + 1),
            _ => current + 1,
        };
        (first_skipped..=current).chain(current + 1..=current + 2)
    }
}

/// One subject's circle in memory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Circle {
    counts: Vec<u64>,
    last: Option<i64>,
}

impl Circle {
    /// redback's `add`.
    pub fn add(&mut self, circle: &BucketCircle, now: Micros) {
        self.counts.resize(circle.buckets as usize, 0);
        for bucket in circle.emptied(now, self.last) {
            self.counts[bucket.rem_euclid(circle.buckets) as usize] = 0;
        }
        self.counts[circle.field(now) as usize] += 1;
        self.last = Some(
            self.last
                .map_or(circle.absolute(now), |l| l.max(circle.absolute(now))),
        );
    }

    /// redback's `count`, without the stale buckets.
    pub fn count(&self, circle: &BucketCircle, now: Micros, lookback: i64) -> u64 {
        circle
            .counted(now, lookback, self.last)
            .map(|bucket| {
                self.counts
                    .get(bucket.rem_euclid(circle.buckets) as usize)
                    .copied()
                    .unwrap_or(0)
            })
            .sum()
    }

    /// True when the subject would have expired (`subject_expiry` after its last add).
    pub fn is_idle(&self, circle: &BucketCircle, now: Micros) -> bool {
        self.last
            .is_none_or(|last| now >= (last + 1) * circle.interval + circle.expiry_seconds * SECOND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redback() -> BucketCircle {
        BucketCircle::new(600.0, 5.0, 1200.0).unwrap()
    }

    const T: Micros = 1_700_000_000 * SECOND;

    #[test]
    fn counts_like_redback() {
        let c = redback();
        let mut s = Circle::default();
        for _ in 0..3 {
            s.add(&c, T);
        }
        s.add(&c, T + 6 * SECOND);
        let lookback = c.lookback(20.0).unwrap();
        assert_eq!(lookback, 4);
        assert_eq!(s.count(&c, T + 6 * SECOND, lookback), 4);
        // The current bucket and the 4 before it: from T + 24 s that still reaches T's bucket,
        // from T + 25 s only the one of T + 6 s.
        assert_eq!(s.count(&c, T + 24 * SECOND, lookback), 4);
        assert_eq!(s.count(&c, T + 25 * SECOND, lookback), 1);
        assert_eq!(s.count(&c, T + 25 * SECOND, c.lookback(0.0).unwrap()), 0);
    }

    #[test]
    fn a_pause_does_not_bring_back_an_earlier_lap() {
        // redback's fault: 10 adds, a pause of exactly one lap (600 s, shorter than the
        // 1200 s expiry), and the old bucket is counted again.
        let c = redback();
        let mut s = Circle::default();
        for _ in 0..10 {
            s.add(&c, T);
        }
        assert_eq!(s.count(&c, T + 600 * SECOND, c.lookback(60.0).unwrap()), 0);
        s.add(&c, T + 600 * SECOND);
        assert_eq!(s.count(&c, T + 600 * SECOND, c.lookback(60.0).unwrap()), 1);
        // And a pause of 3 minutes empties the buckets it skipped.
        s.add(&c, T + 780 * SECOND);
        assert_eq!(s.count(&c, T + 780 * SECOND, c.lookback(600.0).unwrap()), 2);
    }

    #[test]
    fn data_without_a_last_add_counts_as_redback_did() {
        let c = redback();
        let range = c.counted(T, 4, None);
        assert_eq!(range.count(), 5);
    }

    #[test]
    fn intervals_longer_than_the_span_are_refused() {
        let c = redback();
        // The whole span is the whole circle, once (redback would sum 121 buckets of 120).
        assert_eq!(c.lookback(600.0).unwrap(), 119);
        assert_eq!(c.lookback(599.0).unwrap(), 119);
        for bad in [601.0, -1.0, f64::NAN] {
            assert_eq!(
                c.lookback(bad).unwrap_err().code,
                ErrorCode::InvalidArgument
            );
        }
    }

    #[test]
    fn adds_empty_the_two_buckets_ahead_as_redback() {
        let c = redback();
        let emptied: Vec<i64> = c.emptied(T, Some(c.absolute(T))).collect();
        assert_eq!(emptied, [c.absolute(T) + 1, c.absolute(T) + 2]);
    }

    #[test]
    fn options_are_validated() {
        assert!(BucketCircle::new(600.0, 7.0, 1200.0)
            .unwrap_err()
            .message
            .contains("multiple"));
        // Regression: with 1 or 2 buckets, the two buckets an add empties ahead of it are the
        // current one, and counts were lost.
        assert!(BucketCircle::new(10.0, 5.0, 1200.0).is_err());
        assert!(BucketCircle::new(5.0, 5.0, 1200.0).is_err());
        assert!(BucketCircle::new(15.0, 5.0, 1200.0).is_ok());
        assert!(BucketCircle::new(0.0, 5.0, 1200.0)
            .unwrap_err()
            .message
            .contains("`bucket_span`"));
        assert!(BucketCircle::new(600.0, 5.0, 0.5)
            .unwrap_err()
            .message
            .contains("`subject_expiry`"));
    }

    #[test]
    fn subjects_go_idle_after_their_expiry() {
        let c = redback();
        let mut s = Circle::default();
        s.add(&c, T);
        assert!(!s.is_idle(&c, T + 1200 * SECOND));
        assert!(s.is_idle(&c, T + 1205 * SECOND));
    }
}
