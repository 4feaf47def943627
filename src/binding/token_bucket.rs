//! `TokenBucketEngine`: the token bucket (`src/token_bucket.rs`) on memory or Redis.
//!
//! `lib/counting.js` builds the `TokenBucket` class (`consume`, `peek`, `reward`, `reset`,
//! `wait`) on this, through `lib/engine.js`.

use std::sync::LazyLock;

use crate::store::script::LuaScript;
use napi_derive::napi;

use super::counting::Counting;
use super::options::OptionsReader;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::Micros;
use crate::token_bucket::{Bucket, TokenBucket, COUNTS};
use crate::verdict::Verdict;

static SCRIPT: LazyLock<LuaScript> = lua_script!("token_bucket");

/// Options of a token bucket limiter.
///
/// ```js
/// // Bursts of up to 10, then 3 per second.
/// new TokenBucket({ capacity: 10, refillAmount: 3, refillInterval: 1000 })
/// ```
#[napi(object)]
pub struct TokenBucketOptions {
    /// The most tokens a bucket holds: a whole number from 1 to 1e15. Required.
    pub capacity: f64,
    /// Tokens added per `refillInterval`, credited continuously (every microsecond): a whole
    /// number from 1 to 1e15. Default `1`.
    pub refill_amount: Option<f64>,
    /// Milliseconds in which `refillAmount` tokens are added: more than 0 (at least 0.001) and at
    /// most 1e12. Required.
    pub refill_interval: f64,
    /// Tokens a bucket starts with: an id's bucket starts at its first consume (allowed or
    /// refused; a peek starts nothing), holding `initial` as of then, and refills from then on.
    /// A whole number from 0 to `capacity`. Default `capacity`.
    pub initial: Option<f64>,
    /// Milliseconds a full bucket is kept before it is forgotten (the id then starts again from
    /// `initial` at its next consume): more than 0 (at least 0.001) and at most 1e12. Default
    /// `86_400_000` (a day). Meaningless when `initial` is `capacity` (a full bucket is then the
    /// same as none, forgotten at once). Keep it at least 1 ms (the unit of `timeLeft`) and
    /// longer than the time to refill.
    pub forget_after: Option<f64>,
    /// Prefix of the Redis keys: an id's bucket is a string at `namespace + id`, `<tokens>:<ts>`.
    /// Default `'ratekeeper:token:'`. Ignored in memory.
    pub namespace: Option<String>,
}

counting_class!(
    "The token bucket, in memory or on Redis: the native engine under `TokenBucket` (see index.d.ts), which is the API to use. It validates its options like `TokenBucket` does.",
    JsTokenBucket = "TokenBucketEngine" over TokenBucket, options "options: TokenBucketOptions & EngineStoreOptions, store?: RedisStore | null");

impl Counting for TokenBucket {
    type State = Bucket;

    fn script() -> &'static LuaScript {
        &SCRIPT
    }

    fn default_namespace() -> &'static str {
        "ratekeeper:token:"
    }

    fn from_options(r: &mut OptionsReader) -> Outcome<Self> {
        let capacity = r.required_number("capacity")?;
        let refill_amount = r.number("refillAmount")?;
        let refill_interval = r.required_number("refillInterval")?;
        let initial = r.number("initial")?;
        let forget_after = r.number("forgetAfter")?;
        TokenBucket::new(
            capacity,
            refill_amount,
            refill_interval,
            initial,
            forget_after,
        )
    }

    fn shared_args(&self) -> Vec<String> {
        [
            self.capacity(),
            self.unit(),
            self.rate(),
            self.full(),
            self.fresh(),
            self.forget_after() as u64,
        ]
        .iter()
        .map(u64::to_string)
        .collect()
    }

    fn longest_duration(&self) -> Micros {
        TokenBucket::longest_duration(self)
    }

    fn counts(&self, state: Option<&Bucket>, now: Micros, into: &mut Vec<u64>) {
        let level = state.copied().unwrap_or_default().level(self, now);
        into.extend(TokenBucket::counts(&level, now));
    }

    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        _now: Micros,
        charge: bool,
    ) -> Outcome<Verdict> {
        if counts.len() != COUNTS * ids {
            return Err(Failure::error(
                ErrorCode::StoreError,
                "the token bucket script answered the wrong number of levels",
            ));
        }
        Ok(TokenBucket::judge(self, counts, weight, charge))
    }

    fn add(&self, state: &mut Bucket, weight: u64, now: Micros) {
        state.take(self, weight, now);
    }

    fn reward(&self, state: &mut Bucket, weight: u64, now: Micros) -> bool {
        state.reward(self, weight, now)
    }

    fn starts_on_refusal(&self) -> bool {
        TokenBucket::starts_on_refusal(self)
    }

    fn is_idle(&self, state: &Bucket, now: Micros) -> bool {
        state.is_idle(self, now)
    }
}
