//! `FixedWindowEngine`: fixed window counters (`src/fixed_window.rs`) on memory or Redis.
//!
//! `lib/counting.js` builds the `FixedWindow` class (`consume`, `peek`, `reset`) on this,
//! through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;
use smallvec::SmallVec;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::{Counters, FixedWindow};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("fixed_window");

/// One limit of a fixed window: at most `limit` weight per `duration`.
#[napi(object)]
pub struct FixedWindowLimit {
    /// The window's length in milliseconds (> 0). Windows are aligned to the clock
    /// (`floor(now / duration)`), so every id's window resets at the same instants.
    pub duration: f64,
    /// The weight the window admits: a whole number from 1 to 1e15.
    pub limit: f64,
}

/// Options of a fixed window limiter.
///
/// ```js
/// new FixedWindow({ limits: [{ duration: 1000, limit: 10 }, { duration: 60_000, limit: 120 }] })
/// ```
#[napi(object)]
pub struct FixedWindowOptions {
    /// 1 to 16 limits, all checked (and counted) together. Required.
    pub limits: Vec<FixedWindowLimit>,
    /// Prefix of the Redis keys: an id's counters are a hash at `namespace + id`, per limit the
    /// field `<duration µs>:<window index>` holding its count. Limiters sharing a namespace keep
    /// their counters in the same hashes (limits of the same duration share a counter).
    /// Default `'ratekeeper:fixed:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "Fixed window counters, in memory or on Redis: the native engine under `FixedWindow` (see index.d.ts), which is the API to use. It validates its options like `FixedWindow` does.",
    JsFixedWindow = "FixedWindowEngine" over FixedWindow, options "options: FixedWindowOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for FixedWindow {
    type State = Counters;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:fixed:"
    }

    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        let limits = r
            .objects("limits", |limit| {
                Ok((
                    limit.required_number("duration")?,
                    limit.required_number("limit")?,
                ))
            })?
            .ok_or_else(|| r.missing("limits", "an array of { duration, limit }"))?;
        FixedWindow::new(&limits)
    }

    fn shared_args(&self) -> Vec<String> {
        let mut args = vec![self.limits().len().to_string()];
        for limit in self.limits() {
            args.push(limit.duration.to_string());
            args.push(limit.limit.to_string());
        }
        args
    }

    fn longest_duration(&self) -> Micros {
        self.limits().iter().map(|l| l.duration).max().unwrap_or(0)
    }

    fn counts(&self, state: Option<&Counters>, now: Micros, into: &mut Vec<u64>) {
        state
            .unwrap_or(&Counters::default())
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
        // Counts alone (no counter ahead of now's window: the script's usual answer), or counts
        // and how far ahead each counter's window is (see `Counters::counts_at`).
        let counters = ids * self.limits().len();
        if counts.len() == 2 * counters {
            return Ok(FixedWindow::judge(self, counts, weight, now, charge));
        }
        if counts.len() != counters {
            return Err(Failure::error(
                ErrorCode::StoreError,
                "the fixed window script answered the wrong number of counts",
            ));
        }
        let paired: SmallVec<[u64; 8]> = counts.iter().flat_map(|&count| [count, 0]).collect();
        Ok(FixedWindow::judge(self, &paired, weight, now, charge))
    }

    fn add(&self, state: &mut Counters, weight: u64, now: Micros) {
        state.add(self, weight, now);
    }

    fn reward(&self, state: &mut Counters, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn is_idle(&self, state: &Counters, now: Micros) -> bool {
        state.is_idle(self, now)
    }
}
