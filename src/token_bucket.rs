//! The token bucket (the seed's "first attempt", made atomic): each identifier has a bucket of at
//! most `capacity` tokens, refilled by `refill_amount` tokens every `refill_interval`; an action
//! of weight `w` takes `w` tokens and is refused while fewer are left.
//!
//! The refill is continuous and exact. The level is kept in scaled units: with `A` the refill
//! amount, `I` the refill interval in microseconds and `g = gcd(A, I)`, a token is `unit = I / g`
//! units and the bucket gains `rate = A / g` units per microsecond, so `A` tokens per `I` is
//! credited every microsecond with no rounding at all: over any run, the tokens admitted are
//! exactly those a real-valued bucket would admit (a sum of `rate * elapsed` is never rounded).
//!
//! A bucket starts at the first consume of its identifier, allowed or refused: it holds `initial`
//! tokens as of that call and refills from then on (a peek of an identifier without a bucket
//! answers as if it started then, and starts nothing). A full bucket is forgotten once it has been
//! full for `forget_after` (at once when `initial == capacity`, where a full bucket and none are
//! the same): it then counts as none, and the next consume starts it again from `initial`. When
//! it became full follows from the stored level and instant, so memory (whose sweeps drop idle
//! states) and Redis (whose keys expire later still) answer alike whatever they dropped.
//!
//! Pure: no I/O, time is an argument. [`Bucket`] is one identifier's state in memory;
//! `lua/token_bucket.lua` keeps the same numbers in a Redis hash, and both are judged by
//! [`TokenBucket::judge`] from what [`TokenBucket::level`] reads.

use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{duration_option, Micros};
use crate::verdict::{Tally, Verdict, NEVER};

/// The most scaled units a bucket may hold: `capacity * unit` stays exact in a Lua double.
pub const MAX_SCALED: u64 = 1 << 53;

/// How many numbers [`TokenBucket::judge`] takes per identifier.
pub const COUNTS: usize = 2;

/// The default `forgetAfter`: a day, in milliseconds.
pub const DEFAULT_FORGET_AFTER_MS: f64 = 86_400_000.0;

/// A validated token bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBucket {
    capacity: u64,
    initial: u64,
    /// Scaled units per token: `refill_interval / gcd` (the interval in microseconds).
    unit: u64,
    /// Scaled units credited per microsecond: `refill_amount / gcd`.
    rate: u64,
    /// A full bucket, in scaled units: `capacity * unit`, at most [`MAX_SCALED`].
    full: u64,
    /// How long a full bucket is kept before it is forgotten, in microseconds: `forgetAfter`, or
    /// 0 when `initial == capacity` (a full bucket is then the same as none).
    forget: Micros,
}

/// An identifier's bucket as a call at `now` sees it, refilled up to `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// What it holds, in scaled units (`unit` per token).
    pub scaled: u64,
    /// The instant `scaled` is as of: the later of the stored instant and `now` (a late call, from
    /// a host whose clock is behind, gets no refill, and does not move the bucket back).
    pub since: Micros,
    /// Whether the bucket is kept: `false` for a fresh one (none stored, or forgotten by `now`),
    /// which holds `initial` as of `now`.
    pub kept: bool,
}

impl TokenBucket {
    /// Validates the options: `capacity` a whole number from 1 to 1e15, `refill_amount` likewise
    /// (default one), `refill_interval` milliseconds from 0.001 to 1e12, `initial` a whole number
    /// from 0 to `capacity` (default `capacity`), `forget_after` milliseconds from 0.001 to 1e12
    /// (default a day; no effect when `initial == capacity`); and the bucket in scaled units,
    /// `capacity * unit`, at most 2^53.
    ///
    /// No sum of a time to refill and `forget_after` (which may pass 2^53) is ever formed in the
    /// script: it compares their difference, so no further bound is needed.
    pub fn new(
        capacity: f64,
        refill_amount: Option<f64>,
        refill_interval: f64,
        initial: Option<f64>,
        forget_after: Option<f64>,
    ) -> Outcome<Self> {
        let capacity = count_option("capacity", capacity, 1.0)?;
        let amount = count_option("refillAmount", refill_amount.unwrap_or(1.0), 1.0)?;
        let interval = duration_option("refillInterval", refill_interval, 0.0, true)? as u64;
        let initial = match initial {
            Some(initial) => count_option("initial", initial, 0.0)?,
            None => capacity,
        };
        if initial > capacity {
            return Err(Failure::range_error(
                ErrorCode::InvalidOption,
                format!("`initial` must be a whole number from 0 to `capacity` ({capacity}), got {initial}"),
            ));
        }
        let forget_after = duration_option(
            "forgetAfter",
            forget_after.unwrap_or(DEFAULT_FORGET_AFTER_MS),
            0.0,
            true,
        )?;
        let g = gcd(amount, interval);
        let (unit, rate) = (interval / g, amount / g);
        let full = u128::from(capacity) * u128::from(unit);
        if full > u128::from(MAX_SCALED) {
            return Err(Failure::range_error(
                ErrorCode::InvalidOption,
                format!(
                    "`capacity` ({capacity}) is too large for `refillInterval` ({refill_interval} ms) and \
                     `refillAmount` ({amount}): the level is kept exactly in 1/{unit} of a token (the interval \
                     in microseconds over gcd(refillAmount, interval)), and capacity * {unit} = {full} \
                     exceeds 2^53, the largest whole number a Lua double holds exactly. Use a smaller \
                     capacity, a shorter refillInterval, or a refillAmount that shares a larger factor \
                     with it"
                ),
            ));
        }
        Ok(Self {
            capacity,
            initial,
            unit,
            rate,
            full: full as u64,
            forget: if initial < capacity { forget_after } else { 0 },
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Scaled units per token.
    pub fn unit(&self) -> u64 {
        self.unit
    }

    /// Scaled units credited per microsecond.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// A full bucket, in scaled units.
    pub fn full(&self) -> u64 {
        self.full
    }

    /// A fresh bucket (no state), in scaled units: `initial * unit`.
    pub fn fresh(&self) -> u64 {
        self.initial * self.unit
    }

    /// How long a full bucket is kept, in microseconds (0 when `initial == capacity`).
    pub fn forget_after(&self) -> Micros {
        self.forget
    }

    /// Whether a refused consume starts the buckets of its identifiers that have none: when a
    /// fresh bucket is not full (with `initial == capacity` a started bucket would be full, the
    /// same as none).
    pub fn starts_on_refusal(&self) -> bool {
        self.initial < self.capacity
    }

    /// Microseconds until a bucket at `from` holds `to` (0 when it does): the refill is credited
    /// every microsecond, so this rounds up.
    pub fn time_to(&self, from: u64, to: u64) -> Micros {
        to.saturating_sub(from).div_ceil(self.rate) as Micros
    }

    /// The time to refill an empty bucket.
    pub fn refill_time(&self) -> Micros {
        self.time_to(0, self.full)
    }

    /// How long after its last write a bucket may still matter: it refills completely, then is
    /// kept full for [`forget_after`](Self::forget_after).
    pub fn longest_duration(&self) -> Micros {
        self.refill_time() + self.forget
    }

    /// The level at `now` of a bucket that held `scaled` at `last`, or `None` when it has been
    /// full for `forget` by then (it became full `time_to(scaled, full)` after `last`). A late
    /// call (`now` before `last`) gets no refill. `rate * elapsed` is computed only below the time
    /// to full, so it stays below `full - scaled`: no sum or product ever exceeds `full`. (A
    /// stored level above `full`, another configuration's, is a full bucket.)
    pub fn refilled(&self, scaled: u64, last: Micros, now: Micros) -> Option<u64> {
        let elapsed = now.saturating_sub(last).max(0);
        let to_full = self.time_to(scaled, self.full);
        if elapsed < to_full {
            Some(scaled + self.rate * elapsed as u64)
        } else if elapsed - to_full < self.forget {
            Some(self.full)
        } else {
            None
        }
    }

    /// The bucket at `now` of an identifier whose stored state is `stored` (`(scaled, last)`).
    pub fn level(&self, stored: Option<(u64, Micros)>, now: Micros) -> Level {
        match stored.and_then(|(scaled, last)| Some((self.refilled(scaled, last, now)?, last))) {
            Some((scaled, last)) => Level {
                scaled,
                since: last.max(now),
                kept: true,
            },
            None => Level {
                scaled: self.fresh(),
                since: now,
                kept: false,
            },
        }
    }

    /// The numbers [`judge`](Self::judge) takes for one identifier, from its bucket at `now`.
    pub fn counts(level: &Level, now: Micros) -> [u64; COUNTS] {
        [level.scaled, level.since.saturating_sub(now) as u64]
    }

    /// The verdict on taking `weight` from the buckets whose levels are `counts`, [`COUNTS`]
    /// numbers per identifier (see [`counts`](Self::counts)): the scaled level, and how far the
    /// bucket is ahead of now (a late call's lag: its bucket refills from then on). A fresh
    /// bucket is judged like one that starts now. With `charge` an allowed weight is taken
    /// before `remaining` and `reset_after` are reported.
    pub fn judge(&self, counts: &[u64], weight: u64, charge: bool) -> Verdict {
        let buckets = || counts.chunks_exact(COUNTS).map(|c| (c[0], c[1] as Micros));
        // A weight above the capacity never passes; below it, `weight * unit <= full <= 2^53`.
        let need = (weight <= self.capacity).then(|| weight * self.unit);
        let time_left = match need {
            Some(need) => self.wait(buckets(), need),
            None => NEVER,
        };
        let allowed = time_left == 0;
        let taken = match need {
            Some(need) if allowed && charge => need,
            _ => 0,
        };
        let mut tally = Tally::default();
        for (scaled, ahead) in buckets() {
            let left = scaled.saturating_sub(taken);
            let reset_after = ahead + self.time_to(left, self.full);
            let remaining = (left / self.unit).min(self.capacity);
            tally.add(self.capacity, self.capacity - remaining, reset_after);
        }
        tally.verdict(allowed, time_left)
    }

    /// How long until every bucket holds `need`, nothing else happening (0: they do now): the
    /// latest over the buckets of the time each takes to hold it, from its instant (a bucket
    /// ahead of now refills only from then on; one that holds `need` admits now).
    ///
    /// A bucket holds `need` before it is full, so before it can be forgotten: for one
    /// identifier this is exact. With several, one whose bucket has been full for almost
    /// `forget_after` may be forgotten before the others hold `need`, and then hold `initial`:
    /// a call at the answered time, when `initial < need`, is refused again (and starts it). So
    /// `forget_after` should be longer than the time to refill (a day, by default): shorter, such
    /// ids could keep forgetting each other's buckets while the other refills.
    fn wait(&self, buckets: impl Iterator<Item = (u64, Micros)>, need: u64) -> Micros {
        buckets
            .filter(|&(scaled, _)| scaled < need)
            .map(|(scaled, ahead)| ahead + self.time_to(scaled, need))
            .max()
            .unwrap_or(0)
    }
}

/// The greatest common divisor (both positive).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// One identifier's bucket in memory: its level in scaled units and the instant it is as of, or
/// nothing.
///
/// A bucket is forgotten once it has been full for `forget_after` (at once when `initial ==
/// capacity`): it is then the same as none, and an identifier's next consume starts it again from
/// `initial`, as on Redis whatever expired first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    stored: Option<(u64, Micros)>,
}

impl Bucket {
    /// The bucket at `now`.
    pub fn level(&self, bucket: &TokenBucket, now: Micros) -> Level {
        bucket.level(self.stored, now)
    }

    /// Takes `weight` tokens at `now` (an allowed consume: the bucket holds them). A weight of 0
    /// (a refused consume) starts a bucket that has none, at `initial` as of `now`, and leaves a
    /// kept one as it is.
    pub fn take(&mut self, bucket: &TokenBucket, weight: u64, now: Micros) {
        let level = self.level(bucket, now);
        if weight == 0 && level.kept {
            return;
        }
        let need = weight.min(bucket.capacity) * bucket.unit;
        self.stored = Some((level.scaled.saturating_sub(need), level.since));
    }

    /// Gives `weight` tokens back at `now`, up to full. Returns `true` when the bucket is then
    /// the same as none (forgotten by now, or filled when `initial == capacity`): it is dropped.
    /// A full bucket that is kept (`initial < capacity`) is left as it is, and one the reward
    /// fills is kept full as of its instant. A bucket never gets created.
    pub fn reward(&mut self, bucket: &TokenBucket, weight: u64, now: Micros) -> bool {
        let level = self.level(bucket, now);
        if !level.kept {
            self.stored = None;
            return true;
        }
        if level.scaled >= bucket.full {
            return false;
        }
        let room = bucket.full - level.scaled;
        let scaled = if u128::from(weight) * u128::from(bucket.unit) < u128::from(room) {
            level.scaled + weight * bucket.unit
        } else {
            bucket.full
        };
        if scaled == bucket.full && bucket.forget == 0 {
            self.stored = None;
            return true;
        }
        self.stored = Some((scaled, level.since));
        false
    }

    /// True when there is no bucket, or it is forgotten at `now`: it no longer affects any
    /// answer.
    pub fn is_idle(&self, bucket: &TokenBucket, now: Micros) -> bool {
        !self.level(bucket, now).kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;

    fn bucket(capacity: f64, amount: f64, interval_ms: f64, initial: Option<f64>) -> TokenBucket {
        TokenBucket::new(capacity, Some(amount), interval_ms, initial, None).unwrap()
    }

    fn forgetting(capacity: f64, interval_ms: f64, initial: f64, forget_ms: f64) -> TokenBucket {
        TokenBucket::new(capacity, None, interval_ms, Some(initial), Some(forget_ms)).unwrap()
    }

    /// A memory store of some identifiers, as the engine runs it: judge, take when allowed, and
    /// on a refusal of a weight that can pass start the buckets that have none.
    fn consume(tb: &TokenBucket, ids: &mut [&mut Bucket], weight: u64, now: Micros) -> Verdict {
        let counts = counts(tb, ids, now);
        let verdict = tb.judge(&counts, weight, true);
        let start = !verdict.allowed && verdict.time_left != NEVER && tb.starts_on_refusal();
        if verdict.allowed || start {
            let weight = if verdict.allowed { weight } else { 0 };
            for b in ids.iter_mut() {
                b.take(tb, weight, now);
            }
        }
        verdict
    }

    fn counts(tb: &TokenBucket, ids: &[&mut Bucket], now: Micros) -> Vec<u64> {
        ids.iter()
            .flat_map(|b| TokenBucket::counts(&b.level(tb, now), now))
            .collect()
    }

    fn peek(tb: &TokenBucket, b: &Bucket, weight: u64, now: Micros) -> Verdict {
        tb.judge(&TokenBucket::counts(&b.level(tb, now), now), weight, false)
    }

    fn v(
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

    /// A small seeded generator (an LCG's high bits).
    struct Seeded(u64);

    impl Seeded {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn scales_by_the_gcd() {
        // 3 tokens per second: a token is 10^6 units, 3 units come each microsecond.
        let tb = bucket(5.0, 3.0, 1000.0, None);
        assert_eq!((tb.unit(), tb.rate(), tb.full()), (1_000_000, 3, 5_000_000));
        // 4 tokens per 10 ms: gcd(4, 10_000) = 4, a token is 2500 units, 1 unit per µs.
        let tb = bucket(2.0, 4.0, 10.0, None);
        assert_eq!((tb.unit(), tb.rate(), tb.full()), (2500, 1, 5000));
        assert_eq!(tb.refill_time(), 5 * MS);
    }

    #[test]
    fn forgets_after_a_day_by_default_only_below_capacity() {
        let tb = bucket(5.0, 1.0, 1000.0, None);
        assert_eq!((tb.forget_after(), tb.longest_duration()), (0, 5 * SECOND));
        assert!(!tb.starts_on_refusal());
        let tb = bucket(5.0, 1.0, 1000.0, Some(4.0));
        assert_eq!(tb.forget_after(), 86_400 * SECOND);
        assert_eq!(tb.longest_duration(), 86_405 * SECOND);
        assert!(tb.starts_on_refusal());
        // Accepted (and checked) whatever `initial` is; meaningless when it is the capacity.
        let tb = TokenBucket::new(5.0, None, 1000.0, None, Some(10.0)).unwrap();
        assert_eq!(tb.forget_after(), 0);
    }

    #[test]
    fn spends_and_refills_exactly() {
        // 2 tokens, 1 per 400 ms: a token is 400_000 units, one unit per µs.
        let tb = bucket(2.0, 1.0, 400.0, None);
        let mut b = Bucket::default();
        // A fresh bucket is full: 2 tokens; after 1, 1 is left and the bucket is full in 400 ms.
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, 0),
            v(true, 0, 1, 2, 400 * MS)
        );
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, 0),
            v(true, 0, 0, 2, 800 * MS)
        );
        // Empty at 100 ms (100_000 units of 400_000): 300 ms to wait.
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, 100 * MS),
            v(false, 300 * MS, 0, 2, 700 * MS)
        );
        assert!(!peek(&tb, &b, 1, 400 * MS - 1).allowed);
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, 400 * MS),
            v(true, 0, 0, 2, 800 * MS)
        );
        // Idle for long: full, and with initial == capacity forgotten at once: a fresh bucket.
        assert!(b.is_idle(&tb, 1200 * MS));
        assert!(!b.is_idle(&tb, 1200 * MS - 1));
        assert_eq!(peek(&tb, &b, 1, 10 * SECOND), v(true, 0, 2, 2, 0));
    }

    #[test]
    fn a_weight_above_the_capacity_never_passes_and_starts_nothing() {
        for initial in [None, Some(2.0)] {
            let tb = bucket(5.0, 1.0, 1000.0, initial);
            let mut b = Bucket::default();
            let left = if initial.is_some() { 2 } else { 5 };
            let reset = if initial.is_some() { 3 * SECOND } else { 0 };
            assert_eq!(
                consume(&tb, &mut [&mut b], 6, 0),
                v(false, NEVER, left, 5, reset)
            );
            assert_eq!(b, Bucket::default());
            assert_eq!(
                consume(&tb, &mut [&mut b], 1_000_000_000_000_000, 0).time_left,
                NEVER
            );
            assert_eq!(b, Bucket::default());
        }
        let tb = bucket(5.0, 1.0, 1000.0, None);
        let mut b = Bucket::default();
        assert_eq!(
            consume(&tb, &mut [&mut b], 5, 0),
            v(true, 0, 0, 5, 5 * SECOND)
        );
    }

    #[test]
    fn a_late_call_gets_no_refill_and_does_not_move_the_bucket_back() {
        let tb = bucket(3.0, 1.0, 1000.0, None);
        let mut b = Bucket::default();
        assert!(consume(&tb, &mut [&mut b], 3, 10 * SECOND).allowed);
        // 500 ms behind the bucket: no refill, and the bucket stays as of 10 s; it holds a token
        // at 11 s, 1.5 s from the late call's now.
        let late = consume(&tb, &mut [&mut b], 1, 9500 * MS);
        assert_eq!(late, v(false, 1500 * MS, 0, 3, 3500 * MS));
        assert!(!peek(&tb, &b, 1, 11 * SECOND - 1).allowed);
        assert_eq!(b.level(&tb, 9 * SECOND).since, 10 * SECOND);
        assert!(consume(&tb, &mut [&mut b], 1, 11 * SECOND).allowed);
        assert!(!consume(&tb, &mut [&mut b], 1, 10_500 * MS).allowed);
        // Below capacity, a refused late call does not move a kept bucket either.
        let tb = bucket(3.0, 1.0, 1000.0, Some(1.0));
        let mut b = Bucket::default();
        assert!(consume(&tb, &mut [&mut b], 1, 10 * SECOND).allowed);
        let before = b;
        assert_eq!(
            consume(&tb, &mut [&mut b], 2, 9 * SECOND),
            v(false, 3 * SECOND, 0, 3, 4 * SECOND)
        );
        assert_eq!(b, before);
    }

    #[test]
    fn admits_exactly_what_the_rate_gives_over_a_long_run() {
        // 3 tokens per second (333.33... ms per token), spent greedily at irregular instants (at
        // most 1.3 s apart: the bucket never fills) for a simulated day: exactly initial +
        // floor(3 * elapsed / 1 s). With initial 0 the first call is refused, and starts it.
        for initial in [5, 0] {
            let tb = bucket(5.0, 3.0, 1000.0, Some(initial as f64));
            let mut b = Bucket::default();
            let start = 1_700_000_000 * SECOND;
            let (mut now, mut admitted, mut seed) = (start, 0u64, Seeded(7));
            while now < start + 86_400 * SECOND {
                for weight in [4, 2, 1] {
                    if consume(&tb, &mut [&mut b], weight, now).allowed {
                        admitted += weight;
                    }
                }
                assert_eq!(admitted, initial + 3 * (now - start) as u64 / 1_000_000);
                now += seed.below(1_300_000) as Micros;
            }
        }
    }

    #[test]
    fn time_left_is_exact() {
        // Stored states of every kind (empty to full, refilling, kept full, forgotten, late) and
        // none: after a refused consume answering t, still refused at now + t - 1, allowed at
        // now + t.
        let configs = [
            bucket(7.0, 3.0, 700.0, None),
            bucket(7.0, 3.0, 700.0, Some(2.0)),
            forgetting(5.0, 1000.0, 0.0, 1.0),
            forgetting(3.0, 0.9, 1.0, 0.5),
        ];
        let mut seed = Seeded(11);
        let mut checked = 0;
        for tb in configs {
            for _ in 0..2000 {
                let span = (tb.longest_duration() + 2 * SECOND) as u64;
                let mut b = Bucket::default();
                if seed.below(5) > 0 {
                    b.stored = Some((seed.below(tb.full() + 1), 500 * MS));
                }
                let weight = 1 + seed.below(tb.capacity());
                let now = seed.below(span) as Micros;
                let refused = consume(&tb, &mut [&mut b], weight, now);
                if refused.allowed {
                    continue;
                }
                let t = refused.time_left;
                assert!(!peek(&tb, &b, weight, now + t - 1).allowed, "{tb:?} {b:?}");
                assert!(consume(&tb, &mut [&mut b], weight, now + t).allowed);
                checked += 1;
            }
        }
        assert!(checked > 2000, "{checked}");
    }

    #[test]
    fn initial_zero_starts_empty_and_refills_from_the_first_call() {
        // 3 tokens, 1 per second (unit 10^6, rate 1), none to start with, forgotten after being
        // full for 10 s.
        let tb = forgetting(3.0, 1000.0, 0.0, 10_000.0);
        let mut b = Bucket::default();
        // A new id: refused, a token in exactly 1 s, full in 3 s; the refusal starts the bucket.
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, 0),
            v(false, SECOND, 0, 3, 3 * SECOND)
        );
        assert_eq!(b.stored, Some((0, 0)));
        assert!(!peek(&tb, &b, 1, SECOND - 1).allowed);
        assert_eq!(
            consume(&tb, &mut [&mut b], 1, SECOND),
            v(true, 0, 0, 3, 3 * SECOND)
        );
        // The whole capacity passes once the bucket is full: 3 s after 1 s.
        assert_eq!(
            consume(&tb, &mut [&mut b], 3, SECOND),
            v(false, 3 * SECOND, 0, 3, 3 * SECOND)
        );
        assert_eq!(
            consume(&tb, &mut [&mut b], 3, 4 * SECOND),
            v(true, 0, 0, 3, 3 * SECOND)
        );
        // A slow client (every 9 s, three refill times) finds it full every time: full at 7 s,
        // kept (full for 6 s of the 10).
        for k in 1..=5 {
            let now = 4 * SECOND + k * 9 * SECOND;
            assert_eq!(
                consume(&tb, &mut [&mut b], 3, now),
                v(true, 0, 0, 3, 3 * SECOND),
                "at {now}"
            );
        }
        // The last take at 49 s: full at 52 s, forgotten at 62 s.
        assert_eq!(peek(&tb, &b, 1, 62 * SECOND - 1), v(true, 0, 3, 3, 0));
        assert!(!b.is_idle(&tb, 62 * SECOND - 1));
        assert!(b.is_idle(&tb, 62 * SECOND));
        // Then it is a new id's: a peek answers as if it started now, and starts nothing.
        assert_eq!(
            peek(&tb, &b, 1, 70 * SECOND),
            v(false, SECOND, 0, 3, 3 * SECOND)
        );
        assert_eq!(
            peek(&tb, &b, 1, 80 * SECOND),
            v(false, SECOND, 0, 3, 3 * SECOND)
        );
        // A consume does: a token 1 s after it.
        assert!(!consume(&tb, &mut [&mut b], 1, 80 * SECOND).allowed);
        assert_eq!(b.stored, Some((0, 80 * SECOND)));
        assert!(consume(&tb, &mut [&mut b], 1, 81 * SECOND).allowed);
    }

    #[test]
    fn a_refusal_leaves_a_kept_bucket_as_it_is() {
        // a is full from 4 s, and kept: a refused call over it and a new id starts the new id's
        // bucket, and leaves a's as it is (its forgetting is not put off).
        let tb = forgetting(3.0, 1000.0, 1.0, 10_000.0);
        let (mut a, mut c) = (Bucket::default(), Bucket::default());
        assert!(consume(&tb, &mut [&mut a], 1, SECOND).allowed);
        let kept = a;
        // a: full since 4 s; c: fresh, 1 token, 2 s from 3: refused, and c is started.
        assert_eq!(
            consume(&tb, &mut [&mut a, &mut c], 3, 5 * SECOND),
            v(false, 2 * SECOND, 1, 3, 2 * SECOND)
        );
        assert_eq!(a, kept);
        assert_eq!(c.stored, Some((tb.unit(), 5 * SECOND)));
        assert!(consume(&tb, &mut [&mut a, &mut c], 3, 7 * SECOND).allowed);
    }

    #[test]
    fn a_call_passes_when_every_bucket_holds_the_weight() {
        // 3 tokens, 1 to start with, 1 per second.
        let tb = bucket(3.0, 1.0, 1000.0, Some(1.0));
        let (mut a, mut c) = (Bucket::default(), Bucket::default());
        assert!(consume(&tb, &mut [&mut a], 1, 0).allowed);
        // a: 0 tokens at 0, 2 at 2 s; c: no bucket, 1 token as of now, 2 at 1 s. The latest: 2 s;
        // a is full in 3 s, c in 2 s. The refusal starts c (not a).
        assert_eq!(
            consume(&tb, &mut [&mut a, &mut c], 2, 0),
            v(false, 2 * SECOND, 0, 3, 3 * SECOND)
        );
        assert_eq!(c.stored, Some((tb.unit(), 0)));
        assert!(!consume(&tb, &mut [&mut a, &mut c], 2, 2 * SECOND - 1).allowed);
        // At 2 s: a 2 -> 0 (full in 3 s), c 3 (full since 2 s, kept) -> 1 (full in 2 s).
        assert_eq!(
            consume(&tb, &mut [&mut a, &mut c], 2, 2 * SECOND),
            v(true, 0, 0, 3, 3 * SECOND)
        );
    }

    #[test]
    fn a_bucket_forgotten_while_another_refills_holds_initial_again() {
        // The documented limit of an exact wait over several ids: 2 tokens, 1 per second, none to
        // start with, forgotten after 1 s full. a is full at 0 (a reward filled it).
        let tb = forgetting(2.0, 1000.0, 0.0, 1000.0);
        let (mut a, mut c) = (Bucket::default(), Bucket::default());
        assert!(!consume(&tb, &mut [&mut a], 1, 0).allowed);
        assert!(!a.reward(&tb, 5, 0));
        // At 0.5 s: a full (forgotten at 1 s), c new: a token for c in 1 s.
        assert_eq!(
            consume(&tb, &mut [&mut a, &mut c], 1, 500 * MS).time_left,
            SECOND
        );
        // At 1.5 s c holds a token, but a was forgotten at 1 s: it holds 0 again, and is started
        // now; c is full in 1 s.
        assert_eq!(
            consume(&tb, &mut [&mut a, &mut c], 1, 1500 * MS),
            v(false, SECOND, 0, 2, 2 * SECOND)
        );
        assert!(consume(&tb, &mut [&mut a, &mut c], 1, 2500 * MS).allowed);
    }

    #[test]
    fn rewards_give_back_up_to_full_and_never_create() {
        let tb = bucket(5.0, 1.0, 1000.0, None);
        let mut b = Bucket::default();
        assert!(b.reward(&tb, 1, 0));
        assert!(consume(&tb, &mut [&mut b], 4, 0).allowed);
        assert!(!b.reward(&tb, 2, 0));
        assert_eq!(b.level(&tb, 0).scaled, 3 * tb.unit());
        // Filled: with initial == capacity, the same as none, dropped.
        assert!(b.reward(&tb, 2, 0));
        assert_eq!(b, Bucket::default());
        assert!(consume(&tb, &mut [&mut b], 4, 0).allowed);
        assert!(b.reward(&tb, 1_000_000_000_000_000, 0));
    }

    #[test]
    fn below_capacity_a_reward_that_fills_keeps_the_bucket_full() {
        // 4 tokens, 2 to start with, 1 per second, forgotten after 10 s full.
        let tb = forgetting(4.0, 1000.0, 2.0, 10_000.0);
        let mut b = Bucket::default();
        assert!(b.reward(&tb, 1, 0));
        assert_eq!(b, Bucket::default());
        assert!(consume(&tb, &mut [&mut b], 2, 0).allowed);
        assert!(!b.reward(&tb, 1, 0));
        assert_eq!(b.stored, Some((tb.unit(), 0)));
        // At 1 s it holds 2; a huge reward fills it: full as of 1 s, kept until 11 s.
        assert!(!b.reward(&tb, 1_000_000_000_000_000, SECOND));
        assert_eq!(b.stored, Some((tb.full(), SECOND)));
        // A full kept bucket is left as it is (its forgetting is not put off).
        assert!(!b.reward(&tb, 1, 5 * SECOND));
        assert_eq!(b.stored, Some((tb.full(), SECOND)));
        assert_eq!(peek(&tb, &b, 4, 11 * SECOND - 1), v(true, 0, 4, 4, 0));
        // Forgotten at 11 s: a reward drops it.
        assert!(b.reward(&tb, 1, 11 * SECOND));
        assert_eq!(b, Bucket::default());
    }

    #[test]
    fn never_admits_more_than_capacity_plus_the_refill() {
        // Random calls on one bucket, late ones and forgotten buckets restarting at `initial`
        // included: in any span of t µs between the instants weight is charged at (a bucket's
        // instant: a late call is charged at it), at most capacity + floor(A * t / I) pass, that
        // is capacity * unit + rate * t units.
        let configs = [
            bucket(4.0, 3.0, 1000.0, None),
            bucket(4.0, 3.0, 1000.0, Some(1.0)),
            forgetting(3.0, 500.0, 0.0, 1.0),
            forgetting(5.0, 250.0, 2.0, 300.0),
        ];
        let mut seed = Seeded(5);
        for tb in configs {
            for _ in 0..40 {
                let mut b = Bucket::default();
                let mut now: Micros = 100 * SECOND;
                let mut log: Vec<(Micros, u64)> = Vec::new();
                for _ in 0..300 {
                    now += seed.below(800 * MS as u64) as Micros - 200 * MS;
                    let weight = 1 + seed.below(tb.capacity() + 1);
                    let since = b.level(&tb, now).since;
                    if seed.below(8) == 0 {
                        b.reward(&tb, weight, now);
                        log.clear();
                    } else if consume(&tb, &mut [&mut b], weight, now).allowed {
                        log.push((since, weight));
                    }
                }
                for i in 0..log.len() {
                    let mut sum = 0;
                    for &(at, weight) in &log[i..] {
                        sum += weight;
                        let t = (at - log[i].0) as u64;
                        assert!(sum * tb.unit() <= tb.full() + tb.rate() * t, "{tb:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn options_are_validated() {
        /// capacity, refillAmount, refillInterval, initial, forgetAfter, what the error names.
        type Case = (
            f64,
            Option<f64>,
            f64,
            Option<f64>,
            Option<f64>,
            &'static str,
        );
        let cases: &[Case] = &[
            (0.0, None, 1000.0, None, None, "`capacity`"),
            (1.5, None, 1000.0, None, None, "`capacity`"),
            (1e16, None, 1000.0, None, None, "`capacity`"),
            (5.0, Some(0.0), 1000.0, None, None, "`refillAmount`"),
            (5.0, None, 0.0, None, None, "`refillInterval`"),
            (5.0, None, 0.0004, None, None, "`refillInterval`"),
            (5.0, None, 2e12, None, None, "`refillInterval`"),
            (5.0, None, 1000.0, Some(6.0), None, "`initial`"),
            (5.0, None, 1000.0, Some(-1.0), None, "`initial`"),
            (5.0, None, 1000.0, Some(1.0), Some(0.0), "`forgetAfter`"),
            (5.0, None, 1000.0, Some(1.0), Some(-5.0), "`forgetAfter`"),
            (5.0, None, 1000.0, Some(1.0), Some(0.0004), "`forgetAfter`"),
            (5.0, None, 1000.0, Some(1.0), Some(1.5e12), "`forgetAfter`"),
            (5.0, None, 1000.0, None, Some(f64::NAN), "`forgetAfter`"),
            // 10 tokens of 10^15 units: more than 2^53.
            (10.0, None, 1e12, None, None, "2^53"),
        ];
        for &(capacity, amount, interval, initial, forget, name) in cases {
            let err = TokenBucket::new(capacity, amount, interval, initial, forget).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains(name), "{}", err.message);
        }
        // Exactly 2^53 units: 2^33 tokens of 2^20 units (1048.576 ms per token).
        let tb = TokenBucket::new(8_589_934_592.0, None, 1048.576, None, None).unwrap();
        assert_eq!(tb.full(), MAX_SCALED);
        assert!(TokenBucket::new(8_589_934_593.0, None, 1048.576, None, None).is_err());
        // A refill amount sharing factors with the interval allows more.
        assert!(TokenBucket::new(1e15, Some(1e15), 1e12, None, None).is_ok());
        // The longest refill (2^53 µs) and forgetAfter (10^15 µs) together pass 2^53: allowed,
        // as nothing adds them in the script.
        let tb = TokenBucket::new(8_589_934_592.0, None, 1048.576, Some(0.0), Some(1e12)).unwrap();
        assert_eq!(tb.longest_duration(), (1 << 53) + 1_000_000_000_000_000);
    }
}
