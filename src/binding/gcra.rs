//! `GcraEngine`: the generic cell rate algorithm (`src/gcra.rs`) on memory or Redis.
//!
//! `lib/counting.js` builds the `Gcra` class (`consume`, `peek`, `reward`, `reset`, `wait`) on
//! this, through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::gcra::{Arrival, Gcra};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("gcra");

/// Options of a GCRA limiter.
///
/// ```js
/// new Gcra({ limit: 30, period: 60_000, burst: 16 })
/// ```
#[napi(object)]
pub struct GcraOptions {
    /// The sustained rate: `limit` weight per `period`, a whole number from 1 to 1e15. Required.
    pub limit: f64,
    /// The period of `limit`, in milliseconds (> 0, at most 1e12). One weight costs
    /// `period / limit`, in whole microseconds rounded up. Required.
    pub period: f64,
    /// The most weight admitted at once (redis-cell's `max_burst + 1`): a whole number from 1
    /// to 1e15. Default `limit`. `burst * period / limit` may not pass 1e12 ms.
    pub burst: Option<f64>,
    /// Prefix of the Redis keys: an id's TAT is a string at `namespace + id`.
    /// Default `'ratekeeper:gcra:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "The generic cell rate algorithm, in memory or on Redis: the native engine under `Gcra` (see index.d.ts), which is the API to use.",
    JsGcra = "GcraEngine" over Gcra, options "options: GcraOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for Gcra {
    type State = Arrival;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:gcra:"
    }

    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        let limit = r.required_number("limit")?;
        let period = r.required_number("period")?;
        let burst = r.number("burst")?;
        Gcra::new(limit, period, burst)
    }

    fn shared_args(&self) -> Vec<String> {
        vec![
            self.interval().to_string(),
            self.burst().to_string(),
            self.tau().to_string(),
        ]
    }

    /// A key lives until its TAT plus a second (the script sets that TTL on every write); a
    /// TAT, once reached, counts as none.
    fn longest_duration(&self) -> Micros {
        self.tau()
    }

    fn counts(&self, state: Option<&Arrival>, _now: Micros, into: &mut Vec<u64>) {
        into.push(state.map_or(0, |a| a.tat as u64));
    }

    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        now: Micros,
        charge: bool,
    ) -> Outcome<Verdict> {
        if counts.len() != ids {
            return Err(Failure::error(
                ErrorCode::StoreError,
                "the GCRA script answered the wrong number of TATs",
            ));
        }
        Ok(Gcra::judge(self, counts, weight, now, charge))
    }

    fn add(&self, state: &mut Arrival, weight: u64, now: Micros) {
        state.add(self, weight, now);
    }

    fn reward(&self, state: &mut Arrival, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn is_idle(&self, state: &Arrival, now: Micros) -> bool {
        state.is_idle(now)
    }
}
