//! The answer every counting limiter gives: `{ allowed, timeLeft, remaining, limit, resetAfter }`.

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

impl Verdict {
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
