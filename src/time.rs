//! Time as the algorithms see it: integer microseconds since the Unix epoch.
//!
//! Microseconds are what rolling-rate-limiter stores as sorted-set scores, so our Redis data and
//! theirs read alike. The public API speaks milliseconds (fractions allowed); this module converts
//! and bounds them so that every sum of a time and a duration stays exact in a Lua double
//! (below 2^53 microseconds).

use crate::error::{ErrorCode, Failure, Outcome};

/// Microseconds, since the epoch for instants, or a duration.
pub type Micros = i64;

/// How far behind the newest call another call's `now` may be (a host whose clock is behind)
/// and still be judged alike on both stores: the second of clock skew that every Redis key's TTL
/// allows. State that matters to such a call is kept that much longer.
pub const CLOCK_SKEW: Micros = 1_000_000;

/// The longest duration an option may have: 10^12 ms, about 31.7 years.
pub const MAX_DURATION_MS: f64 = 1e12;

/// The latest instant a `{ now }` argument may name: 4 * 10^12 ms, in the year 2096.
pub const MAX_NOW_MS: f64 = 4e12;

/// Converts milliseconds (fractions allowed) to whole microseconds, rounding to the nearest.
pub fn millis_to_micros(ms: f64) -> Micros {
    (ms * 1000.0).round() as Micros
}

/// Converts microseconds to milliseconds, rounding up (as rolling-rate-limiter does), so that
/// waiting the returned time is always enough.
pub fn micros_to_millis_ceil(us: Micros) -> i64 {
    us.div_euclid(1000) + i64::from(us.rem_euclid(1000) != 0)
}

/// The host's clock.
pub fn system_now() -> Micros {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    since_epoch.as_micros() as Micros
}

/// Checks a duration option given in milliseconds: finite, within `min..=MAX_DURATION_MS`.
/// `min_exclusive` rejects `min` itself (for "must be positive").
pub fn duration_option(name: &str, ms: f64, min: f64, min_exclusive: bool) -> Outcome<Micros> {
    let too_small = if min_exclusive { ms <= min } else { ms < min };
    if !ms.is_finite() || too_small || ms > MAX_DURATION_MS {
        let bound = if min_exclusive {
            "greater than"
        } else {
            "at least"
        };
        return Err(Failure::range_error(
            ErrorCode::InvalidOption,
            format!(
                "`{name}` must be a finite number of milliseconds {bound} {min} and at most {MAX_DURATION_MS:e}, got {ms}"
            ),
        ));
    }
    let micros = millis_to_micros(ms);
    // Time is kept in whole microseconds: a positive duration must stay positive there.
    if min_exclusive && micros <= 0 {
        return Err(Failure::range_error(
            ErrorCode::InvalidOption,
            format!("`{name}` must be at least 0.001 milliseconds (one microsecond), got {ms}"),
        ));
    }
    Ok(micros)
}

/// Checks a `{ now }` call argument (milliseconds since the epoch).
pub fn now_argument(ms: f64) -> Outcome<Micros> {
    if !ms.is_finite() || !(0.0..=MAX_NOW_MS).contains(&ms) {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!(
                "`now` must be milliseconds since the epoch, from 0 to {MAX_NOW_MS:e}, got {ms}"
            ),
        ));
    }
    Ok(millis_to_micros(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_durations_stay_positive_in_microseconds() {
        // Regression: 0.0004 ms became 0 µs, and windows divided by it.
        let err = duration_option("interval", 0.0004, 0.0, true).unwrap_err();
        assert!(err.message.contains("one microsecond"), "{}", err.message);
        assert_eq!(duration_option("interval", 0.001, 0.0, true).unwrap(), 1);
        assert_eq!(
            duration_option("minDifference", 0.0, 0.0, false).unwrap(),
            0
        );
    }

    #[test]
    fn millis_round_trip_to_micros() {
        assert_eq!(millis_to_micros(1.5), 1500);
        assert_eq!(millis_to_micros(1.0005), 1001);
        assert_eq!(millis_to_micros(0.0), 0);
    }

    #[test]
    fn micros_round_up_to_millis() {
        assert_eq!(micros_to_millis_ceil(0), 0);
        assert_eq!(micros_to_millis_ceil(1), 1);
        assert_eq!(micros_to_millis_ceil(1000), 1);
        assert_eq!(micros_to_millis_ceil(1001), 2);
        assert_eq!(micros_to_millis_ceil(-1500), -1);
    }

    #[test]
    fn durations_are_bounded() {
        assert_eq!(duration_option("interval", 10.0, 0.0, true), Ok(10_000));
        assert_eq!(duration_option("minDifference", 0.0, 0.0, false), Ok(0));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 2e12] {
            let err = duration_option("interval", bad, 0.0, true).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption);
            assert!(err.message.contains("`interval`"), "{}", err.message);
        }
    }

    #[test]
    fn now_must_be_an_instant() {
        assert_eq!(now_argument(1.25), Ok(1250));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 5e12] {
            assert_eq!(
                now_argument(bad).unwrap_err().code,
                ErrorCode::InvalidArgument
            );
        }
    }
}
