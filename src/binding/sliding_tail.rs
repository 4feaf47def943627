//! `SlidingTailEngine`: the sliding tail (`src/sliding_tail.rs`) on memory or Redis.
//!
//! `lib/counting.js` builds the `SlidingTail` class (`consume`, `peek`, `reward`, `reset`) on
//! this, through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::FixedWindow;
use crate::sliding_tail::{tails_of, SlidingTail, Tails};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("sliding_tail");

/// One limit of a sliding tail: at most `limit` weight per `duration`, the previous window
/// counting pro rata.
#[napi(object)]
pub struct SlidingTailLimit {
    /// The window's length in milliseconds (> 0, at least 0.001, at most 1e12). Windows are
    /// aligned to the clock (`floor(now / duration)`).
    pub duration: f64,
    /// The weight the sliding window admits: a whole number from 1 to 1e15.
    pub limit: f64,
}

/// Options of a sliding tail limiter.
///
/// ```js
/// new SlidingTail({ limits: [{ duration: 60_000, limit: 100 }] })
/// ```
#[napi(object)]
pub struct SlidingTailOptions {
    /// 1 to 16 limits, all checked (and counted) together. Required.
    pub limits: Vec<SlidingTailLimit>,
    /// Prefix of the Redis keys: an id's counters are a hash at `namespace + id`.
    /// Default `'ratekeeper:tail:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "The sliding tail (fixed windows with the previous one counted pro rata), in memory or on Redis: the native engine under `SlidingTail` (see index.d.ts), which is the API to use.",
    JsSlidingTail = "SlidingTailEngine" over SlidingTail, options "options: SlidingTailOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for SlidingTail {
    type State = Tails;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:tail:"
    }

    /// The limits are read (and validated) as a fixed window's.
    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        FixedWindow::from_options(r).map(SlidingTail::from)
    }

    /// The fixed window's: L, then each limit's duration and limit.
    fn shared_args(&self) -> Vec<String> {
        self.windows().shared_args()
    }

    /// A window's count matters until the end of the next window.
    fn longest_duration(&self) -> Micros {
        2 * self.limits().iter().map(|l| l.duration).max().unwrap_or(0)
    }

    fn counts(&self, state: Option<&Tails>, now: Micros, into: &mut Vec<u64>) {
        state
            .unwrap_or(&Tails::default())
            .counts_at(self, now, into);
    }

    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        now: Micros,
        charge: bool,
    ) -> Outcome<Verdict> {
        let tails = tails_of(self, ids, counts).ok_or_else(|| {
            Failure::error(
                ErrorCode::StoreError,
                "the sliding tail script answered the wrong number of counts",
            )
        })?;
        Ok(SlidingTail::judge(self, &tails, weight, now, charge))
    }

    fn add(&self, state: &mut Tails, weight: u64, now: Micros) {
        state.add(self, weight, now);
    }

    fn reward(&self, state: &mut Tails, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn is_idle(&self, state: &Tails, now: Micros) -> bool {
        state.is_idle(self, now)
    }
}
