//! What the counting limiters (fixed window, sliding window, ...) share in the binding: the
//! `consume` / `peek` / `reset` modes over one id or several, the in-memory path, and the Redis
//! path through a batched script. Each algorithm says, through [`Counting`], what its state is,
//! how it reads counts and how it judges; its napi class wraps a [`CountingEngine`].

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use redis::{FromRedisValue, Script};

use super::backend::{local_now, memory_id, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values, VALUES};
use super::input::{call_options, ids, CallOptions, Takes};
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::batch::ScriptBatcher;
use crate::store::memory::MemoryStore;
use crate::store::slot::check_one_slot;
use crate::time::Micros;
use crate::verdict::Verdict;

/// Declares the napi class of a counting algorithm: its constructor, `run` and `trackedIds`,
/// over a [`CountingEngine`]. `$options` is the TypeScript type of its options.
macro_rules! counting_class {
    ($(#[$doc:meta])* $class:ident = $js_name:literal over $algorithm:ty, options $options:literal) => {
        $(#[$doc])*
        #[napi_derive::napi(js_name = $js_name)]
        pub struct $class {
            engine: $crate::binding::counting::CountingEngine<$algorithm>,
        }

        #[napi_derive::napi]
        impl $class {
            /// Builds the limiter in memory, or on `store` when one is given.
            /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
            #[napi(constructor, catch_unwind, ts_args_type = $options)]
            pub fn new(
                env: napi::Env,
                options: napi::bindgen_prelude::Unknown,
                store: Option<&$crate::binding::redis_store::JsRedisStore>,
            ) -> napi::Result<Self> {
                $crate::binding::counting::CountingEngine::build(options, store, concat!($js_name, " options"))
                    .map(|engine| Self { engine })
                    .map_err(|failure| $crate::binding::js_error(&env, failure))
            }

            /// The engine's entry point: runs `mode` (0 consume, 1 peek, 2 reset) for one id or
            /// an array of ids, with the call options `{ now, weight }`. In memory the answer is
            /// written to `out` and `true` is returned; on Redis `false` is returned and the answer
            /// reaches `lib/engine.js` under `ticket`. The five numbers are allowed, timeLeft,
            /// remaining, limit and resetAfter. Use the JavaScript class rather than this.
            #[napi(
                catch_unwind,
                ts_args_type = "mode: number, ids: unknown, options: unknown, ticket: number, out: Float64Array"
            )]
            pub fn run(
                &self,
                env: napi::Env,
                mode: u32,
                ids: napi::bindgen_prelude::Unknown,
                options: Option<napi::bindgen_prelude::Unknown>,
                ticket: f64,
                mut out: napi::bindgen_prelude::Float64ArraySlice,
            ) -> napi::Result<bool> {
                self.engine
                    .run(&env, mode, ids, options, ticket, &mut out)
                    .map_err(|failure| $crate::binding::js_error(&env, failure))
            }

            /// How many ids the in-memory store holds state for (always `0` on Redis).
            #[napi(getter, catch_unwind)]
            pub fn tracked_ids(&self) -> u32 {
                self.engine.tracked_ids()
            }

            /// How many active ids the in-memory store evicted to stay within `maxKeys`.
            #[napi(getter, catch_unwind)]
            pub fn evicted_ids(&self) -> f64 {
                self.engine.evicted_ids()
            }
        }
    };
}

/// A counting algorithm, as the binding needs it.
pub trait Counting: Clone + Send + Sync + 'static {
    /// One identifier's state in memory.
    type State: Default;
    /// Its Lua script: shared arguments ([`shared_args`](Self::shared_args), then the mode and
    /// the hash TTL in ms), per call `N, now, weight`, per call `N` keys; reply per call
    /// `{ now, counts... }` (what [`judge`](Self::judge) takes), or an error string.
    fn script() -> &'static Script;
    /// The default Redis key prefix.
    fn default_namespace() -> &'static str;
    /// Reads the algorithm's own options (its `limits`).
    fn from_options(r: &mut OptionsReader) -> Outcome<Self>;
    /// The script's leading arguments: the limits.
    fn shared_args(&self) -> Vec<String>;
    /// The longest duration of its limits.
    fn longest_duration(&self) -> Micros;
    /// How long an identifier's hash lives after its last write: the longest window, and a
    /// second for clock skew (and tests' `now`).
    fn ttl(&self) -> Micros {
        self.longest_duration() + 1_000_000
    }
    /// Appends an identifier's counts at `now` (`None`: no state yet).
    fn counts(&self, state: Option<&Self::State>, now: Micros, into: &mut Vec<u64>);
    /// Judges `weight` at `now` for `ids` identifiers whose counts are `counts`.
    fn judge(&self, ids: usize, counts: &[u64], weight: u64, now: Micros) -> Outcome<Verdict>;
    /// Counts `weight` at `now`.
    fn add(&self, state: &mut Self::State, weight: u64, now: Micros);
    /// Drops what no longer counts at `now`, as the script does on every consume (allowed or
    /// not), so that a later call with an earlier `now` sees the same on both stores.
    fn forget(&self, _state: &mut Self::State, _now: Micros) {}
    /// Whether a state no longer affects any answer.
    fn is_idle(&self, state: &Self::State, now: Micros) -> bool;
}

/// What `run` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Consume,
    Peek,
    Reset,
}

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Consume),
            1 => Ok(Mode::Peek),
            2 => Ok(Mode::Reset),
            _ => Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                format!("unknown mode {code}"),
            )),
        }
    }
}

/// A verdict as numbers: allowed (1 or 0), the wait in milliseconds (rounded up; Infinity when
/// the weight exceeds a limit), the remaining weight, its limit, and the reset in milliseconds.
/// `lib/verdict.js` decodes them.
pub fn verdict_values(verdict: &Verdict) -> Values {
    [
        f64::from(u8::from(verdict.allowed)),
        verdict.time_left_millis(),
        verdict.remaining as f64,
        verdict.limit as f64,
        verdict.reset_after_millis(),
    ]
}

/// A counting algorithm on its store.
pub struct CountingEngine<A: Counting> {
    algorithm: A,
    backend: Backend<A::State>,
    /// On Redis: the script's batchers for consuming and for peeking.
    batchers: Option<[ScriptBatcher; 2]>,
}

impl<A: Counting> CountingEngine<A> {
    /// Reads the options (`context` names them in errors) and builds the engine, on `store` or in
    /// memory.
    pub fn build(
        options: Unknown,
        store: Option<&JsRedisStore>,
        context: &'static str,
    ) -> Outcome<Self> {
        let mut r = OptionsReader::new(Some(options), context, ErrorCode::InvalidOption, false)?;
        let algorithm = A::from_options(&mut r)?;
        let backend = Backend::from_options(&mut r, store, A::default_namespace())?;
        r.finish()?;
        let batchers = match &backend {
            Backend::Redis(target) => Some([
                batcher(&algorithm, target, "consume"),
                batcher(&algorithm, target, "peek"),
            ]),
            Backend::Memory(_) => None,
        };
        Ok(Self {
            algorithm,
            backend,
            batchers,
        })
    }

    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// How many ids the in-memory store holds state for (0 on Redis).
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    /// How many active ids the in-memory store evicted to stay within `maxKeys`.
    pub fn evicted_ids(&self) -> f64 {
        self.backend.memory_evictions() as f64
    }

    /// Runs `mode` (0 consume, 1 peek, 2 reset) for `ids`: answers into `out` at once (memory,
    /// `true`) or later under `ticket` (Redis, `false`).
    pub fn run(
        &self,
        env: &Env,
        mode: u32,
        ids: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        let ticket = Ticket::from_number(ticket)?;
        let mode = Mode::from_code(mode)?;
        let ids = self::ids(ids)?;
        let call = call_options(options, Takes::Weight)?;
        match &self.backend {
            Backend::Memory(store) => {
                let answer = self.answer_in_memory(&mut store.borrow_mut(), &ids, call, mode)?;
                dispatch::write_answer(out, answer)?;
                Ok(true)
            }
            Backend::Redis(target) => {
                self.answer_on_redis(env, ticket, target, &ids, call, mode)?;
                Ok(false)
            }
        }
    }

    fn answer_in_memory(
        &self,
        store: &mut MemoryStore<A::State>,
        ids: &[Option<String>],
        call: CallOptions,
        mode: Mode,
    ) -> Outcome<Values> {
        let now = local_now(call.now);
        let algorithm = &self.algorithm;
        if mode == Mode::Reset {
            for id in ids {
                store.remove(memory_id(id.as_deref()));
            }
            return Ok([0.0; VALUES]);
        }
        if mode == Mode::Consume {
            for id in ids {
                if let Some(state) = store.get_mut(memory_id(id.as_deref())) {
                    algorithm.forget(state, now);
                }
            }
        }
        let mut counts = Vec::new();
        for id in ids {
            algorithm.counts(store.get(memory_id(id.as_deref())), now, &mut counts);
        }
        let verdict = algorithm.judge(ids.len(), &counts, call.weight, now)?;
        if mode == Mode::Consume && verdict.allowed {
            for id in ids {
                let state = store.entry(memory_id(id.as_deref()), now, |s, now| {
                    algorithm.is_idle(s, now)
                });
                algorithm.add(state, call.weight, now);
            }
        }
        Ok(verdict_values(&verdict))
    }

    /// Sends one call to Redis; its answer reaches JavaScript as `ticket` says.
    fn answer_on_redis(
        &self,
        env: &Env,
        ticket: Ticket,
        target: &RedisTarget,
        ids: &[Option<String>],
        call: CallOptions,
        mode: Mode,
    ) -> Outcome<()> {
        let keys = ids
            .iter()
            .map(|id| target.key(id.as_deref()))
            .collect::<Outcome<Vec<_>>>()?;
        check_one_slot(target.store.config(), &keys)?;
        let batchers = self.batchers.as_ref().ok_or_else(|| {
            Failure::error(
                ErrorCode::Internal,
                "a Redis limiter without its script batchers",
            )
        })?;
        // Nothing below fails: the call is pending from here on.
        let reply = dispatch::begin(env, ticket)?;
        let batcher = match mode {
            Mode::Reset => {
                let store = target.store.clone();
                dispatch::spawn(reply, async move {
                    store.delete(&keys).await.map(|()| [0.0; VALUES])
                });
                return Ok(());
            }
            Mode::Consume => &batchers[0],
            Mode::Peek => &batchers[1],
        };
        let args = vec![
            keys.len().to_string(),
            target.now_argument(call.now),
            call.weight.to_string(),
        ];
        let (algorithm, ids, weight) = (self.algorithm.clone(), keys.len(), call.weight);
        batcher.submit(
            keys,
            args,
            Box::new(move |answer| {
                reply.send(answer.and_then(|answer| judge_reply(&algorithm, ids, weight, answer)))
            }),
        );
        Ok(())
    }
}

/// The batcher of one mode of the algorithm's script.
fn batcher<A: Counting>(algorithm: &A, target: &RedisTarget, mode: &str) -> ScriptBatcher {
    let mut shared = algorithm.shared_args();
    shared.push(mode.to_owned());
    shared.push((algorithm.ttl() / 1000).to_string());
    ScriptBatcher::new(
        dispatch::runtime().handle(),
        target.store.clone(),
        A::script(),
        shared,
    )
}

/// The script's `{ now, counts... }` for one call, judged.
fn judge_reply<A: Counting>(
    algorithm: &A,
    ids: usize,
    weight: u64,
    answer: redis::Value,
) -> Outcome<Values> {
    let reply = Vec::<i64>::from_redis_value(answer)
        .map_err(|e| Failure::error(ErrorCode::StoreError, format!("the script answered: {e}")))?;
    let (&now, counts) = reply
        .split_first()
        .ok_or_else(|| Failure::error(ErrorCode::StoreError, "the script answered nothing"))?;
    let counts: Vec<u64> = counts.iter().map(|&c| c.max(0) as u64).collect();
    Ok(verdict_values(&algorithm.judge(
        ids,
        &counts,
        weight,
        now as Micros,
    )?))
}
