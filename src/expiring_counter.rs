//! The expiring counter: rate-limiter-flexible's layout and arithmetic. Per key one whole number,
//! the points consumed, which lives for a duration counted from the first points it took (its
//! window starts at a key's first consume, not at a clock boundary) and is then forgotten.
//! Points add up whatever they sum to: the judgement (over the limit or not) is the caller's, as
//! rate-limiter-flexible makes it from the count. A duration of 0 means a counter that never
//! expires.
//!
//! Pure: no I/O, time is an argument. `Option<Counter>` is one key's state in memory;
//! `lua/expiring_counter.lua` keeps the same count in a Redis string whose TTL is the time left,
//! as rate-limiter-flexible writes it, and answers the same [`Reading`].
//!
//! ```
//! use ratekeeper::expiring_counter::{add, read};
//!
//! let mut key = None;
//! // 2 points, for a window of 1 s starting now (at 0 µs).
//! let first = add(&mut key, 2, 1_000_000, 0).unwrap();
//! assert_eq!((first.points, first.left, first.fresh), (2, Some(1_000_000), true));
//! // 3 more 400 ms later: the same window.
//! assert_eq!(add(&mut key, 3, 1_000_000, 400_000).unwrap().points, 5);
//! // Once it has ended the key holds nothing.
//! assert_eq!(read(&key, 1_000_000), None);
//! ```

use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::Micros;

/// One key's count and when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The points counted (any whole number: rewards may take it below 0).
    pub points: i64,
    /// The instant the counter ends (microseconds), or `None` for never.
    pub ends: Option<Micros>,
}

/// What a key holds at a call's instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The points counted, this call's included.
    pub points: i64,
    /// Microseconds until the counter ends (always above 0), or `None` for never.
    pub left: Option<Micros>,
    /// Whether this call started the counter (the key held none, or one that had ended).
    pub fresh: bool,
}

impl Counter {
    /// The counter as of `now`: `None` once it has ended (its end is reached).
    fn live(slot: &Option<Counter>, now: Micros) -> Option<&Counter> {
        slot.as_ref()
            .filter(|counter| counter.ends.is_none_or(|ends| ends > now))
    }

    fn reading(&self, now: Micros, fresh: bool) -> Reading {
        Reading {
            points: self.points,
            left: self.ends.map(|ends| ends - now),
            fresh,
        }
    }
}

/// Adds `points` to the key's counter at `now`; a key without a live counter starts one holding
/// `points`, for `duration` microseconds (0: it never ends). Fails, changing nothing, when the
/// count would leave the range of a Redis integer (as `INCRBY` does).
pub fn add(
    slot: &mut Option<Counter>,
    points: i64,
    duration: Micros,
    now: Micros,
) -> Outcome<Reading> {
    if Counter::live(slot, now).is_none() {
        return Ok(set(slot, points, duration, now));
    }
    let counter = slot.as_mut().ok_or_else(gone)?;
    counter.points = counter.points.checked_add(points).ok_or_else(|| {
        Failure::range_error(
            ErrorCode::InvalidArgument,
            "increment or decrement would overflow the key's count",
        )
    })?;
    Ok(counter.reading(now, false))
}

/// Sets the key's counter to `points` at `now`, for `duration` microseconds (0: it never ends),
/// whatever it held: a new window (how rate-limiter-flexible's `set` and `block` write).
pub fn set(slot: &mut Option<Counter>, points: i64, duration: Micros, now: Micros) -> Reading {
    let counter = Counter {
        points,
        ends: (duration > 0).then(|| now.saturating_add(duration)),
    };
    *slot = Some(counter);
    counter.reading(now, true)
}

/// Adds `points` as [`add`] does; then, when the key's counter was live already and now holds
/// more than `limit`, starts its window again at `now`: it lasts `duration` times `growth` to the
/// power of how far the count is past `limit + 1`, at most `longest` microseconds (a counter that
/// never ends stays so). @fastify/rate-limit's `continueExceeding` is a growth of 1, its
/// `exponentialBackoff` a growth of 2: every hit over the limit pushes the end further.
///
/// ```
/// use ratekeeper::expiring_counter::add_over;
///
/// let mut key = None;
/// add_over(&mut key, 1, 1_000_000, 0, 1, 2.0, i64::MAX).unwrap();
/// // Over the limit of 1, 300 ms later: the window starts again, 1 s, then 2 s, then 4 s.
/// let over = add_over(&mut key, 1, 1_000_000, 300_000, 1, 2.0, i64::MAX).unwrap();
/// assert_eq!((over.points, over.left, over.fresh), (2, Some(1_000_000), false));
/// let further = add_over(&mut key, 1, 1_000_000, 400_000, 1, 2.0, i64::MAX).unwrap();
/// assert_eq!((further.points, further.left), (3, Some(2_000_000)));
/// ```
pub fn add_over(
    slot: &mut Option<Counter>,
    points: i64,
    duration: Micros,
    now: Micros,
    limit: i64,
    growth: f64,
    longest: Micros,
) -> Outcome<Reading> {
    let reading = add(slot, points, duration, now)?;
    if reading.fresh || reading.points <= limit || duration == 0 {
        return Ok(reading);
    }
    let past = (i128::from(reading.points) - i128::from(limit) - 1) as f64;
    let window = ((duration as f64 * growth.powf(past)).min(longest as f64) as Micros).max(1);
    set(slot, reading.points, window, now);
    // (Not `fresh`: a fresh counter returned above.)
    Ok(Reading {
        left: Some(window),
        ..reading
    })
}

/// What the key holds at `now`: `None` when it has no live counter.
pub fn read(slot: &Option<Counter>, now: Micros) -> Option<Reading> {
    Counter::live(slot, now).map(|counter| counter.reading(now, false))
}

/// Whether the key's state no longer affects any answer: none, or a counter that has ended.
pub fn is_idle(slot: &Option<Counter>, now: Micros) -> bool {
    Counter::live(slot, now).is_none()
}

fn gone() -> Failure {
    Failure::error(ErrorCode::Internal, "a live counter vanished")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Micros = 1_000_000;

    #[test]
    fn a_window_starts_at_the_first_points_and_ends_a_duration_later() {
        let mut key = None;
        let first = add(&mut key, 1, 10 * SECOND, 5 * SECOND).unwrap();
        assert_eq!(
            first,
            Reading {
                points: 1,
                left: Some(10 * SECOND),
                fresh: true
            }
        );
        let later = add(&mut key, 4, 10 * SECOND, 12 * SECOND).unwrap();
        assert_eq!(
            later,
            Reading {
                points: 5,
                left: Some(3 * SECOND),
                fresh: false
            }
        );
        // At its end the counter is gone: the next points start a new window.
        assert_eq!(read(&key, 15 * SECOND), None);
        assert!(is_idle(&key, 15 * SECOND));
        let next = add(&mut key, 2, 10 * SECOND, 15 * SECOND).unwrap();
        assert_eq!(
            (next.points, next.left, next.fresh),
            (2, Some(10 * SECOND), true)
        );
    }

    #[test]
    fn a_duration_of_zero_never_ends() {
        let mut key = None;
        add(&mut key, 3, 0, 0).unwrap();
        let much_later = add(&mut key, -5, 0, 1_000_000 * SECOND).unwrap();
        assert_eq!(
            much_later,
            Reading {
                points: -2,
                left: None,
                fresh: false
            }
        );
        assert!(!is_idle(&key, Micros::MAX));
    }

    #[test]
    fn set_starts_a_new_window_whatever_the_key_held() {
        let mut key = None;
        add(&mut key, 7, 60 * SECOND, 0).unwrap();
        let block = set(&mut key, 11, 5 * SECOND, SECOND);
        assert_eq!(
            block,
            Reading {
                points: 11,
                left: Some(5 * SECOND),
                fresh: true
            }
        );
        assert_eq!(read(&key, 2 * SECOND).map(|r| r.points), Some(11));
        assert_eq!(read(&key, 6 * SECOND), None);
    }

    #[test]
    fn add_over_restarts_the_window_past_the_limit_growing_by_its_factor() {
        let longest = 100 * SECOND;
        let mut key = None;
        let hit = |key: &mut Option<Counter>, at, growth| {
            let r = add_over(key, 1, 10 * SECOND, at, 2, growth, longest).unwrap();
            (r.points, r.left.map(|left| left / SECOND), r.fresh)
        };
        // Within the limit: the window started at the first hit runs on.
        assert_eq!(hit(&mut key, 0, 1.0), (1, Some(10), true));
        assert_eq!(hit(&mut key, 4 * SECOND, 1.0), (2, Some(6), false));
        // Past it, each hit starts it again (continueExceeding: a growth of 1).
        assert_eq!(hit(&mut key, 5 * SECOND, 1.0), (3, Some(10), false));
        assert_eq!(hit(&mut key, 14 * SECOND, 1.0), (4, Some(10), false));
        assert_eq!(read(&key, 23 * SECOND).map(|r| r.points), Some(4));
        assert_eq!(read(&key, 24 * SECOND), None);
        // A growth of 2 (exponentialBackoff): 10 s, 20 s, 40 s, 80 s, then at most `longest`.
        let mut key = None;
        hit(&mut key, 0, 2.0);
        hit(&mut key, 0, 2.0);
        let lefts: Vec<_> = (0..6).map(|_| hit(&mut key, SECOND, 2.0).1).collect();
        assert_eq!(lefts, [10, 20, 40, 80, 100, 100].map(Some));
        // A counter that never ends is not given an end.
        let mut forever = None;
        for _ in 0..4 {
            add_over(&mut forever, 1, 0, 0, 1, 2.0, longest).unwrap();
        }
        assert_eq!(
            read(&forever, Micros::MAX - 1).map(|r| (r.points, r.left)),
            Some((4, None))
        );
    }

    #[test]
    fn an_overflowing_count_fails_and_changes_nothing() {
        let mut key = None;
        add(&mut key, i64::MAX, 0, 0).unwrap();
        let failure = add(&mut key, 1, 0, 0).unwrap_err();
        assert_eq!(failure.code, ErrorCode::InvalidArgument);
        assert_eq!(read(&key, 0).map(|r| r.points), Some(i64::MAX));
    }
}
