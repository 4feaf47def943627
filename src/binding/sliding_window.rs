//! `SlidingWindowEngine`: the precision sliding window (`src/sliding_window.rs`) on memory or
//! Redis.
//!
//! `lib/counting.js` builds the `SlidingWindow` class (`consume`, `peek`, `reset`) on this,
//! through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::sliding_window::{split_live, Buckets, SlidingWindow};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("sliding_window");

/// One limit of a sliding window: at most `limit` weight in any `duration`.
#[napi(object)]
pub struct SlidingWindowLimit {
    /// The window's length in milliseconds (> 0).
    pub duration: f64,
    /// The weight any window admits: a whole number from 1 to 1e15.
    pub limit: f64,
    /// The bucket size in milliseconds: weight comes back bucket by bucket as the window slides.
    /// Default: a tenth of `duration`; at most 3600 buckets per window.
    pub precision: Option<f64>,
}

/// Options of a sliding window limiter.
///
/// ```js
/// new SlidingWindow({ limits: [{ duration: 1000, limit: 1000 }, { duration: 10_000, limit: 5000, precision: 1000 }] })
/// ```
#[napi(object)]
pub struct SlidingWindowOptions {
    /// 1 to 16 limits, all checked (and counted) together. Required.
    pub limits: Vec<SlidingWindowLimit>,
    /// Prefix of the Redis keys: an id's buckets are a hash at `namespace + id`.
    /// Default `'ratekeeper:sliding:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "The precision sliding window, in memory or on Redis: the native engine under `SlidingWindow` (see index.d.ts), which is the API to use.",
    JsSlidingWindow = "SlidingWindowEngine" over SlidingWindow, options "options: SlidingWindowOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for SlidingWindow {
    type State = Buckets;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:sliding:"
    }

    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        let limits = r
            .objects("limits", |limit| {
                Ok((
                    limit.required_number("duration")?,
                    limit.required_number("limit")?,
                    limit.number("precision")?,
                ))
            })?
            .ok_or_else(|| r.missing("limits", "an array of { duration, limit, precision? }"))?;
        SlidingWindow::new(&limits)
    }

    fn shared_args(&self) -> Vec<String> {
        let mut args = vec![self.limits().len().to_string()];
        for limit in self.limits() {
            args.push(limit.duration.to_string());
            args.push(limit.precision.to_string());
            args.push(limit.buckets.to_string());
            args.push(limit.limit.to_string());
        }
        args
    }

    fn longest_duration(&self) -> Micros {
        self.limits().iter().map(|l| l.duration).max().unwrap_or(0)
    }

    fn counts(&self, state: Option<&Buckets>, now: Micros, into: &mut Vec<u64>) {
        state
            .unwrap_or(&Buckets::default())
            .live_counts(self, now, into);
    }

    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        now: Micros,
        charge: bool,
    ) -> Outcome<Verdict> {
        let live = split_live(self, ids, counts).ok_or_else(|| {
            Failure::error(
                ErrorCode::StoreError,
                "the sliding window script answered the wrong number of counts",
            )
        })?;
        Ok(SlidingWindow::judge(self, &live, weight, now, charge))
    }

    fn add(&self, state: &mut Buckets, weight: u64, now: Micros) {
        state.add(self, weight, now);
    }

    fn reward(&self, state: &mut Buckets, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn forget(&self, state: &mut Buckets, now: Micros) {
        state.forget(self, now);
    }

    fn is_idle(&self, state: &Buckets, now: Micros) -> bool {
        state.is_idle(self, now)
    }
}
