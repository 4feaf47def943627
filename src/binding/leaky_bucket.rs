//! `LeakyBucketEngine`: the leaky bucket as a meter (`src/leaky_bucket.rs`) on memory or Redis.
//!
//! `lib/counting.js` builds the `LeakyBucket` class (`consume`, `peek`, `reward`, `reset`,
//! `wait`) on this, through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::leaky_bucket::{Bucket, LeakyBucket};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("leaky_bucket");

/// Options of a leaky bucket.
///
/// ```js
/// new LeakyBucket({ capacity: 3, leakInterval: 20_000 }) // 3 at once, then 1 per 20 s
/// ```
#[napi(object)]
pub struct LeakyBucketOptions {
    /// The most weight the bucket holds: a whole number from 1 to 1e15. Required.
    pub capacity: f64,
    /// The weight that leaks out every `leakInterval`: a whole number from 1 to 1e15.
    /// Default `1`.
    pub leak_amount: Option<f64>,
    /// Milliseconds between leaks (> 0, a whole number of microseconds, at most 1e12).
    /// `ceil(capacity / leakAmount) * leakInterval`, the time a full bucket takes to drain, must
    /// stay below 2^53 µs. Required.
    pub leak_interval: f64,
    /// Prefix of the Redis keys: an id's bucket is a string at `namespace + id`, `<level>:<ts>`.
    /// Default `'ratekeeper:leaky:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "The leaky bucket as a meter, in memory or on Redis: the native engine under `LeakyBucket` (see index.d.ts), which is the API to use.",
    JsLeakyBucket = "LeakyBucketEngine" over LeakyBucket, options "options: LeakyBucketOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for LeakyBucket {
    type State = Bucket;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:leaky:"
    }

    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        let capacity = r.number("capacity")?;
        let leak_amount = r.number("leakAmount")?;
        let leak_interval = r.number("leakInterval")?;
        let (Some(capacity), Some(leak_interval)) = (capacity, leak_interval) else {
            let missing: Vec<&str> = [("`capacity`", capacity), ("`leakInterval`", leak_interval)]
                .iter()
                .filter(|(_, value)| value.is_none())
                .map(|(name, _)| *name)
                .collect();
            let verb = if missing.len() > 1 { "are" } else { "is" };
            return Err(Failure::type_error(
                r.code(),
                format!(
                    "{} {verb} required in LeakyBucket options: `capacity` a whole number \
                     from 1 to 1e15, `leakInterval` milliseconds > 0",
                    missing.join(" and ")
                ),
            ));
        };
        LeakyBucket::new(capacity, leak_amount.unwrap_or(1.0), leak_interval)
    }

    fn shared_args(&self) -> Vec<String> {
        vec![
            self.capacity().to_string(),
            self.leak_amount().to_string(),
            self.leak_interval().to_string(),
        ]
    }

    fn longest_duration(&self) -> Micros {
        self.drain_time()
    }

    fn counts(&self, state: Option<&Bucket>, now: Micros, into: &mut Vec<u64>) {
        let bucket = state.copied().unwrap_or_default().at(self, now);
        into.extend([bucket.level, bucket.ts.max(0) as u64]);
    }

    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        now: Micros,
        charge: bool,
    ) -> Outcome<Verdict> {
        if counts.len() != 2 * ids {
            return Err(Failure::error(
                ErrorCode::StoreError,
                "the leaky bucket script answered the wrong number of counts",
            ));
        }
        let buckets: Vec<Bucket> = counts
            .chunks_exact(2)
            .map(|pair| Bucket {
                level: pair[0],
                ts: pair[1] as Micros,
            })
            .collect();
        Ok(LeakyBucket::judge(self, &buckets, weight, now, charge))
    }

    fn add(&self, state: &mut Bucket, weight: u64, now: Micros) {
        state.add(self, weight, now);
    }

    fn reward(&self, state: &mut Bucket, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn is_idle(&self, state: &Bucket, now: Micros) -> bool {
        state.is_idle(self, now)
    }
}
