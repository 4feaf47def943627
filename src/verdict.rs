//! The answer every counting limiter gives: `{ allowed, timeLeft, remaining, limit, resetAfter }`.

use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::{micros_to_millis_ceil, Micros};

/// A limiter's answer to one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the action is (or, for a peek, would be) allowed; an allowed action was counted.
    pub allowed: bool,
    /// How long until the same call would be allowed: 0 when it is, [`NEVER`] when it never
    /// will be (its weight exceeds a limit).
    pub time_left: Micros,
    /// How much weight the most constraining limit still admits now.
    pub remaining: u64,
    /// That limit.
    pub limit: u64,
    /// How long until every counter of the call is back to zero (0 when none holds anything).
    pub reset_after: Micros,
}

/// `time_left` of a call that can never be allowed.
pub const NEVER: Micros = Micros::MAX;

/// The most limits one limiter takes.
pub const MAX_LIMITS: usize = 16;

/// Checks the number of limits of a limiter's `limits` option.
pub fn check_limit_count(count: usize) -> Outcome<()> {
    if count == 0 || count > MAX_LIMITS {
        return Err(Failure::range_error(
            ErrorCode::InvalidOption,
            format!("`limits` must hold 1 to {MAX_LIMITS} limits, got {count}"),
        ));
    }
    Ok(())
}

/// Gathers, over every (identifier, limit) of a call, what a [`Verdict`] reports besides the
/// decision: the tightest limit (the least weight left; the smaller limit on a tie) and the
/// latest reset.
#[derive(Debug, Clone, Copy)]
pub struct Tally {
    remaining: u64,
    limit: u64,
    reset_after: Micros,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            remaining: u64::MAX,
            limit: u64::MAX,
            reset_after: 0,
        }
    }
}

impl Tally {
    /// A limit of `limit` that holds `used` weight (after the call) and is back to zero in
    /// `reset_after`.
    pub fn add(&mut self, limit: u64, used: u64, reset_after: Micros) {
        let left = limit.saturating_sub(used);
        if left < self.remaining || (left == self.remaining && limit < self.limit) {
            self.remaining = left;
            self.limit = limit;
        }
        if used > 0 {
            self.reset_after = self.reset_after.max(reset_after);
        }
    }

    pub fn verdict(self, allowed: bool, time_left: Micros) -> Verdict {
        Verdict {
            allowed,
            time_left,
            remaining: self.remaining,
            limit: self.limit,
            reset_after: self.reset_after,
        }
    }
}

impl Verdict {
    /// This verdict, reached at an instant that may be up to `later` before the one its waits
    /// must count from, with its waits counted from that later instant: `time_left` and
    /// `reset_after` shortened by `later`, never below 1 µs when they were above 0 (a refusal
    /// keeps a wait, a counter that holds something a reset), [`NEVER`] kept. So a wait added to
    /// a clock read before the call never ends after the one the limiter would answer then.
    ///
    /// ```
    /// # use ratekeeper::verdict::Verdict;
    /// let verdict = Verdict { allowed: false, time_left: 2_500, remaining: 0, limit: 5, reset_after: 300 };
    /// let later = verdict.counted_from_later(400);
    /// assert_eq!((later.time_left, later.reset_after), (2_100, 1));
    /// ```
    pub fn counted_from_later(self, later: Micros) -> Self {
        let shorten = |wait: Micros| match wait {
            0 | NEVER => wait,
            wait => (wait - later).max(1),
        };
        Self {
            time_left: shorten(self.time_left),
            reset_after: shorten(self.reset_after),
            ..self
        }
    }

    /// `time_left` in whole milliseconds, rounded up; `f64::INFINITY` for [`NEVER`].
    pub fn time_left_millis(&self) -> f64 {
        millis_or_infinity(self.time_left)
    }

    /// `reset_after` in whole milliseconds, rounded up.
    pub fn reset_after_millis(&self) -> f64 {
        millis_or_infinity(self.reset_after)
    }
}

fn millis_or_infinity(us: Micros) -> f64 {
    if us == NEVER {
        f64::INFINITY
    } else {
        micros_to_millis_ceil(us) as f64
    }
}
