//! The generic cell rate algorithm (GCRA), as redis-cell's `CL.THROTTLE`, Redis 8's GCRA and the
//! governor crate run it: per identifier one number, the theoretical arrival time (TAT), the
//! instant at which the identifier's schedule of one action every emission interval `T` would
//! be back to empty.
//!
//! `limit` actions per `period` sustained, up to `burst` at once: `T = ceil(period / limit)` in
//! whole microseconds (rounded up, so that no `period` ever admits more than `limit` beyond the
//! burst; the token bucket is the exact one for any rate), and the tolerance `tau = T * burst`.
//! A weight `w` costs `w * T`: it is allowed at `now` when `max(tat, now) + w * T - tau <= now`,
//! and then moves the TAT there. Every number is an integer: no float drift can refuse a first
//! request or misreport `remaining`.
//!
//! Pure: no I/O, time is an argument. [`Arrival`] is one identifier's state in memory;
//! `lua/gcra.lua` keeps the same TAT in a Redis string, and both judge through [`Gcra::judge`].

use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{duration_option, Micros, MAX_DURATION_MS};
use crate::verdict::{Tally, Verdict, NEVER};

/// The longest `tau` (the time a full burst takes to drain): the longest duration an option may
/// have, so that `now + 2 * tau` (a TAT written by a host ahead, plus a charge) stays exact in a
/// Lua double.
const MAX_TAU: Micros = MAX_DURATION_MS as Micros * 1000;

/// A validated GCRA: `limit` per `period`, bursts of `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    /// The emission interval `T`: what a weight of 1 costs, in microseconds (at least 1).
    interval: Micros,
    /// The most weight admitted at once.
    burst: u64,
    /// The delay variation tolerance `tau = T * burst`.
    tau: Micros,
}

impl Gcra {
    /// Validates `limit` (a whole number from 1 to 1e15) per `period` (milliseconds, > 0, at most
    /// 1e12) and `burst` (a whole number from 1 to 1e15; default `limit`). The burst's duration
    /// `T * burst` may not pass 1e12 ms either. Errors name the options.
    pub fn new(limit: f64, period_ms: f64, burst: Option<f64>) -> Outcome<Self> {
        let limit = count_option("limit", limit, 1.0)?;
        let period = duration_option("period", period_ms, 0.0, true)?;
        let burst = count_option("burst", burst.unwrap_or(limit as f64), 1.0)?;
        let interval = (period as u64).div_ceil(limit) as Micros;
        let tau = i128::from(interval) * i128::from(burst);
        if tau > i128::from(MAX_TAU) {
            return Err(Failure::range_error(
                ErrorCode::InvalidOption,
                format!(
                    "`burst` * `period` / `limit` (the time a full burst takes to drain: {burst} \
                     * {interval} µs) must be at most {MAX_DURATION_MS:e} ms"
                ),
            ));
        }
        Ok(Self {
            interval,
            burst,
            tau: tau as Micros,
        })
    }

    /// The emission interval `T` in microseconds.
    pub fn interval(&self) -> Micros {
        self.interval
    }

    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// The delay variation tolerance `tau = T * burst`, in microseconds.
    pub fn tau(&self) -> Micros {
        self.tau
    }

    /// What `weight` costs, for a weight of at most `burst` (`T * burst` is exact).
    fn cost(&self, weight: u64) -> Micros {
        self.interval * weight as Micros
    }

    /// The verdict on `weight` at `now` for identifiers whose stored TATs are `tats` (0 for
    /// none). A TAT at or before `now` counts as none. With `charge` an allowed weight is taken
    /// before `remaining` and `reset_after` are reported (a consume); without, they are those of
    /// now (a peek).
    pub fn judge(&self, tats: &[u64], weight: u64, now: Micros, charge: bool) -> Verdict {
        let mut allowed = true;
        let mut time_left: Micros = 0;
        if weight > self.burst {
            allowed = false;
            time_left = NEVER;
        } else {
            for &tat in tats {
                let allow_at = (tat as Micros).max(now) + self.cost(weight) - self.tau;
                if allow_at > now {
                    allowed = false;
                    time_left = time_left.max(allow_at - now);
                }
            }
        }
        let charged = if allowed && charge {
            self.cost(weight)
        } else {
            0
        };
        let mut tally = Tally::default();
        for &tat in tats {
            // How long until this identifier is back to empty, and the weight that stands for.
            let until_empty = (tat as Micros).max(now) + charged - now;
            let used = (until_empty as u64).div_ceil(self.interval as u64);
            tally.add(self.burst, used, until_empty);
        }
        tally.verdict(allowed, time_left)
    }

    /// The TAT after charging `weight` (at most `burst`) at `now` to a stored `tat`.
    pub fn charged(&self, tat: Micros, weight: u64, now: Micros) -> Micros {
        tat.max(now) + self.cost(weight)
    }

    /// The TAT after giving `weight` back at `now`, or `None` when nothing is left (the TAT
    /// would be at or before `now`: the identifier is empty). Any weight: the product is exact
    /// in 128 bits.
    pub fn refunded(&self, tat: Micros, weight: u64, now: Micros) -> Option<Micros> {
        let left = i128::from(tat) - i128::from(self.interval) * i128::from(weight);
        (left > i128::from(now)).then_some(left as Micros)
    }
}

/// One identifier's state in memory: its TAT (0, like any TAT at or before now, is empty).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub tat: Micros,
}

impl Arrival {
    /// Charges an allowed `weight` at `now`.
    pub fn add(&mut self, gcra: &Gcra, weight: u64, now: Micros) {
        self.tat = gcra.charged(self.tat, weight, now);
    }

    /// Gives `weight` back at `now`. Returns `true` when the identifier is left empty.
    pub fn reward(&mut self, gcra: &Gcra, weight: u64, now: Micros) -> bool {
        match gcra.refunded(self.tat, weight, now) {
            Some(tat) => {
                self.tat = tat;
                false
            }
            None => {
                self.tat = 0;
                true
            }
        }
    }

    /// True when the TAT is not after `now`: the same as no state.
    pub fn is_idle(&self, now: Micros) -> bool {
        self.tat <= now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Micros = 1000;
    const SECOND: Micros = 1000 * MS;

    fn gcra(limit: f64, period: f64, burst: Option<f64>) -> Gcra {
        Gcra::new(limit, period, burst).unwrap()
    }

    /// A memory store of one identifier: judge, and charge when allowed.
    fn consume(g: &Gcra, a: &mut Arrival, weight: u64, now: Micros) -> Verdict {
        let verdict = g.judge(&[a.tat as u64], weight, now, true);
        if verdict.allowed {
            a.add(g, weight, now);
        }
        verdict
    }

    fn numbers(v: Verdict) -> (bool, Micros, u64, u64, Micros) {
        (v.allowed, v.time_left, v.remaining, v.limit, v.reset_after)
    }

    #[test]
    fn the_emission_interval_is_rounded_up() {
        assert_eq!(gcra(3.0, 1000.0, None).interval(), 333_334);
        assert_eq!(gcra(4.0, 1000.0, None).interval(), 250_000);
        // Faster than one per microsecond is one per microsecond.
        assert_eq!(gcra(1e6, 1.0, None).interval(), 1);
        let g = gcra(7.0, 1000.0, Some(1.0));
        assert_eq!((g.interval(), g.tau()), (142_858, 142_858));
    }

    #[test]
    fn redis_cell_s_own_table() {
        // redis-cell's it_rate_limits: max_burst 4 (our burst 5), 1 per second.
        let g = gcra(1.0, 1000.0, Some(5.0));
        let mut a = Arrival::default();
        let start = 1_700_000_000 * SECOND;
        // A weight above the burst never passes; nothing is written.
        assert_eq!(
            numbers(consume(&g, &mut a, 6, start)),
            (false, NEVER, 5, 5, 0)
        );
        for (i, remaining) in [4, 3, 2, 1, 0].into_iter().enumerate() {
            let reset = (i as Micros + 1) * SECOND;
            assert_eq!(
                numbers(consume(&g, &mut a, 1, start)),
                (true, 0, remaining, 5, reset)
            );
        }
        assert_eq!(
            numbers(consume(&g, &mut a, 1, start)),
            (false, SECOND, 0, 5, 5 * SECOND)
        );
        let at = |ms: Micros| start + ms * MS;
        assert_eq!(
            numbers(consume(&g, &mut a, 1, at(3000))),
            (true, 0, 2, 5, 3000 * MS)
        );
        assert_eq!(
            numbers(consume(&g, &mut a, 1, at(3100))),
            (true, 0, 1, 5, 3900 * MS)
        );
        assert_eq!(
            numbers(consume(&g, &mut a, 1, at(4000))),
            (true, 0, 1, 5, 4000 * MS)
        );
        assert_eq!(
            numbers(consume(&g, &mut a, 1, at(8000))),
            (true, 0, 4, 5, 1000 * MS)
        );
        assert_eq!(
            numbers(consume(&g, &mut a, 1, at(9500))),
            (true, 0, 4, 5, 1000 * MS)
        );
        // A peek (redis-cell's quantity 0 answers the state of now).
        let peek = g.judge(&[a.tat as u64], 1, at(9500), false);
        assert_eq!(numbers(peek), (true, 0, 4, 5, SECOND));
        assert_eq!(
            numbers(consume(&g, &mut a, 2, at(9500))),
            (true, 0, 2, 5, 3 * SECOND)
        );
        assert_eq!(
            numbers(consume(&g, &mut a, 5, at(9500))),
            (false, 3 * SECOND, 2, 5, 3 * SECOND)
        );
    }

    #[test]
    fn the_wait_is_exact() {
        let g = gcra(3.0, 1000.0, Some(2.0));
        let mut a = Arrival::default();
        assert!(consume(&g, &mut a, 2, 0).allowed);
        let refused = consume(&g, &mut a, 1, 10);
        assert_eq!(refused.time_left, 333_334 - 10);
        assert!(!g.judge(&[a.tat as u64], 1, 333_333, false).allowed);
        assert!(consume(&g, &mut a, 1, 333_334).allowed);
    }

    #[test]
    fn no_drift_on_odd_configurations() {
        // 7 per second, burst 1: T = 142,858 µs.
        let g = gcra(7.0, 1000.0, Some(1.0));
        let mut a = Arrival::default();
        let v = consume(&g, &mut a, 1, 1_700_000_000 * SECOND);
        assert_eq!(numbers(v), (true, 0, 0, 1, 142_858));
        // A million per millisecond: one per microsecond, a burst of a million.
        let g = gcra(1e6, 1.0, None);
        let mut a = Arrival::default();
        let now = 1_700_000_000 * SECOND + 7;
        assert_eq!(
            numbers(consume(&g, &mut a, 1, now)),
            (true, 0, 999_999, 1_000_000, 1)
        );
        assert_eq!(numbers(consume(&g, &mut a, 999_999, now)).2, 0);
        assert_eq!(consume(&g, &mut a, 1, now).time_left, 1);
        assert_eq!(numbers(consume(&g, &mut a, 1, now + 1)).2, 0);
        assert_eq!(g.judge(&[a.tat as u64], 1, now + 11, false).remaining, 10);
        // A burst of a billion.
        let g = gcra(10.0, 1000.0, Some(1e9));
        let mut a = Arrival::default();
        assert_eq!(numbers(consume(&g, &mut a, 1, now)).2, 999_999_999);
        assert_eq!(numbers(consume(&g, &mut a, 999_999_998, now)).2, 1);
        assert_eq!(
            g.judge(&[a.tat as u64], 1, now + 99_999, false).remaining,
            1
        );
        assert_eq!(
            g.judge(&[a.tat as u64], 1, now + 100_000, false).remaining,
            2
        );
    }

    #[test]
    fn a_stale_tat_is_no_tat() {
        let g = gcra(2.0, 1000.0, None);
        let fresh = g.judge(&[0], 1, 5 * SECOND, true);
        let stale = g.judge(&[SECOND as u64], 1, 5 * SECOND, true);
        assert_eq!(fresh, stale);
        assert_eq!(
            numbers(g.judge(&[SECOND as u64], 1, 5 * SECOND, false)),
            (true, 0, 2, 2, 0)
        );
        assert!(Arrival { tat: SECOND }.is_idle(SECOND));
        assert!(!Arrival { tat: SECOND }.is_idle(SECOND - 1));
    }

    #[test]
    fn a_late_call_neither_crashes_nor_over_admits() {
        // Written by a host ahead: the TAT is further than tau from a late `now`.
        let g = gcra(1.0, 1000.0, Some(2.0));
        let v = g.judge(&[10 * SECOND as u64], 1, 5 * SECOND, true);
        assert_eq!(numbers(v), (false, 4 * SECOND, 0, 2, 5 * SECOND));
    }

    #[test]
    fn several_identifiers_are_charged_together_or_not_at_all() {
        let g = gcra(1.0, 1000.0, Some(3.0));
        let v = g.judge(&[0, 2 * SECOND as u64], 2, 0, true);
        assert_eq!(numbers(v), (false, SECOND, 1, 3, 2 * SECOND));
        let v = g.judge(&[0, SECOND as u64], 2, 0, true);
        assert_eq!(numbers(v), (true, 0, 0, 3, 3 * SECOND));
    }

    #[test]
    fn a_reward_moves_the_tat_back_never_before_now() {
        let g = gcra(1.0, 1000.0, Some(5.0));
        let mut a = Arrival::default();
        assert!(consume(&g, &mut a, 4, 0).allowed);
        assert!(!a.reward(&g, 1, 0));
        assert_eq!(a.tat, 3 * SECOND);
        // Any weight, even past what the product of two 1e15 holds in 64 bits.
        assert!(a.reward(&g, 1_000_000_000_000_000, 0));
        assert_eq!(a.tat, 0);
        let g = gcra(1.0, 1e12, Some(1.0));
        assert_eq!(g.refunded(1, 1_000_000_000_000_000, 0), None);
    }

    #[test]
    fn options_are_validated() {
        for (limit, period, burst, name) in [
            (0.0, 1000.0, None, "`limit`"),
            (1.5, 1000.0, None, "`limit`"),
            (1.0, 0.0, None, "`period`"),
            (1.0, 2e12, None, "`period`"),
            (1.0, 1000.0, Some(0.0), "`burst`"),
            (1.0, 1000.0, Some(2e15), "`burst`"),
            (1.0, 1e12, Some(2.0), "`burst` * `period` / `limit`"),
            (1.0, 1000.0, Some(1e15), "`burst` * `period` / `limit`"),
        ] {
            let err = Gcra::new(limit, period, burst).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains(name), "{}", err.message);
        }
        // The longest burst allowed: 1e12 ms.
        assert_eq!(gcra(1.0, 1e12, None).tau(), MAX_TAU);
    }
}
