//! What the counting limiters (fixed window, sliding window, ...) share in the binding: the
//! `consume` / `peek` / `reset` modes over one id or several, the in-memory path, and the Redis
//! path through a batched script. Each algorithm says, through [`Counting`], what its state is,
//! how it reads counts and how it judges; its napi class wraps a [`CountingEngine`].

use std::cell::RefCell;

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use redis::FromRedisValue;

use crate::store::script::LuaScript;
use smallvec::SmallVec;

use super::backend::{local_now, memory_id, now_text, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values, VALUES};
use super::fast::{FastRan, FastRun};
use super::input::{call_options, fast_call_options, ids, CallOptions, Takes};
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::batch::ScriptBatcher;
use crate::store::memory::{Key, MemoryStore};
use crate::store::slot::check_one_slot;
use crate::time::{millis_to_micros, Micros};
use crate::verdict::{Verdict, NEVER};

/// Declares the napi class of a counting algorithm: its constructor, `run` and `trackedIds`,
/// over a [`CountingEngine`]. `$options` is the TypeScript type of its options.
///
/// The class's doc is a plain string: a `///` comment passed through a macro reaches napi-derive
/// as a raw string, which it copies into `binding.d.ts` with its `r"` on every line.
macro_rules! counting_class {
    ($doc:literal, $class:ident = $js_name:literal over $algorithm:ty, options $options:literal) => {
        #[doc = $doc]
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

            /// The engine's entry point: runs `mode` (0 consume, 1 peek, 2 reset, 3 reward) for one
            /// id or an array of ids, with the call options `{ now, weight }`. In memory the answer is
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

            /// Sweeps the in-memory store when no call used it since the last time (ids gone
            /// idle are given back even when no call comes): `lib/engine.js` calls it every
            /// `periodMs`. Nothing on Redis.
            #[napi(catch_unwind)]
            pub fn sweep_if_quiet(&self, period_ms: f64) {
                self.engine.sweep_if_quiet(period_ms)
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

        $crate::fast_path_method!($class.engine);
    };
}

/// A counting algorithm, as the binding needs it: every limiter answering
/// `{ allowed, timeLeft, remaining, limit, resetAfter }` (the windows, the buckets, GCRA).
///
/// "Counts" are whatever numbers the algorithm's judgement needs per identifier (counters,
/// bucket levels, instants), the same from the memory store ([`counts`](Self::counts)) as from
/// the script's reply, so that one [`judge`](Self::judge) answers for both stores.
pub trait Counting: Clone + Send + Sync + 'static {
    /// One identifier's state in memory.
    type State: Default;
    /// Its Lua script: shared arguments ([`shared_args`](Self::shared_args), then the mode,
    /// `consume`, `peek` or `reward`, and the key TTL in ms), per call `N, now, weight` (sent
    /// as `src/store/batch.rs` says), per call `N` keys; its `judge` gives `{ now, counts... }`
    /// per call, which `each_counting_call` in `lua/prelude.lua` replies without the now (what
    /// [`judge`](Self::judge) takes: for `reward`, the counts after the refund), or an error
    /// string. `reward` gives `weight` back to each identifier that has state, never below
    /// empty, and creates none.
    fn script() -> &'static LuaScript;
    /// The default Redis key prefix.
    fn default_namespace() -> &'static str;
    /// Reads the algorithm's own options (its `limits`).
    fn from_options(r: &mut OptionsReader) -> Outcome<Self>;
    /// The script's leading arguments: the limits.
    fn shared_args(&self) -> Vec<String>;
    /// How long after a write an identifier's state may still matter: the longest window (two
    /// for the sliding tail, the time to refill or drain for the buckets).
    fn longest_duration(&self) -> Micros;
    /// How long an identifier's key lives after its last write: [`longest_duration`]
    /// (Self::longest_duration), and a second for clock skew (and tests' `now`). A script may
    /// give each key a tighter TTL of its own (GCRA and the token bucket do), never a looser one.
    fn ttl(&self) -> Micros {
        self.longest_duration() + 1_000_000
    }
    /// Appends an identifier's counts at `now` (`None`: no state yet).
    fn counts(&self, state: Option<&Self::State>, now: Micros, into: &mut Vec<u64>);
    /// Judges `weight` at `now` for `ids` identifiers whose counts are `counts`. With `charge`
    /// (a consume), an allowed weight is taken: `remaining` and `resetAfter` are those after
    /// it; without (a peek), they are those of now.
    fn judge(
        &self,
        ids: usize,
        counts: &[u64],
        weight: u64,
        now: Micros,
        charge: bool,
    ) -> Outcome<Verdict>;
    /// Counts `weight` at `now`.
    fn add(&self, state: &mut Self::State, weight: u64, now: Micros);
    /// Gives `weight` back at `now`, never below empty. Returns `true` when the state is left
    /// empty (the store then drops it).
    fn reward(&self, state: &mut Self::State, weight: u64, now: Micros) -> bool;
    /// Whether a refused consume (of a weight that can pass later) still starts the state of each
    /// of its ids that has none, as `add` of weight 0 would, and its script likewise: a token
    /// bucket whose new ids start below capacity refills from their first call. Default `false`.
    fn starts_on_refusal(&self) -> bool {
        false
    }
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
    /// Give weight back; answers as a peek of weight 1 afterwards.
    Reward,
}

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Consume),
            1 => Ok(Mode::Peek),
            2 => Ok(Mode::Reset),
            3 => Ok(Mode::Reward),
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
    /// On Redis: the script's batchers for consuming, peeking and rewarding.
    batchers: Option<[ScriptBatcher; 3]>,
    /// In memory: the buffer the ids' counts are gathered in.
    counts: RefCell<Vec<u64>>,
}

impl<A: Counting> CountingEngine<A> {
    /// Reads the options (`context` names them in errors) and builds the engine, on `store` or in
    /// memory.
    pub fn build(
        options: Unknown,
        store: Option<&JsRedisStore>,
        context: &'static str,
    ) -> Outcome<Self> {
        // Errors name the JavaScript class (`FixedWindow options`), not its engine.
        let context = context.replace("Engine options", " options");
        let mut r = OptionsReader::new(Some(options), context, ErrorCode::InvalidOption, false)?;
        let algorithm = A::from_options(&mut r)?;
        let backend = Backend::from_options(&mut r, store, A::default_namespace())?;
        r.finish()?;
        let batchers = match &backend {
            Backend::Redis(target) => Some([
                batcher(&algorithm, target, "consume"),
                batcher(&algorithm, target, "peek"),
                batcher(&algorithm, target, "reward"),
            ]),
            Backend::Memory(_) => None,
        };
        Ok(Self {
            algorithm,
            backend,
            batchers,
            counts: RefCell::default(),
        })
    }

    pub fn algorithm(&self) -> &A {
        &self.algorithm
    }

    /// See the classes' `sweepIfQuiet`.
    pub fn sweep_if_quiet(&self, period_ms: f64) {
        let algorithm = &self.algorithm;
        self.backend
            .sweep_if_quiet(millis_to_micros(period_ms), |s, now| {
                algorithm.is_idle(s, now)
            });
    }

    /// How many ids the in-memory store holds state for (0 on Redis).
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    /// How many active ids the in-memory store evicted to stay within `maxKeys`.
    pub fn evicted_ids(&self) -> f64 {
        self.backend.memory_evictions() as f64
    }

    /// Runs `mode` (0 consume, 1 peek, 2 reset, 3 reward) for `ids`: answers into `out` at once (memory,
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
                let ids: Vec<Option<&str>> = ids.iter().map(Option::as_deref).collect();
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
        ids: &[Option<&str>],
        call: CallOptions,
        mode: Mode,
    ) -> Outcome<Values> {
        let now = local_now(call.now);
        let algorithm = &self.algorithm;
        let keys: SmallVec<[Key; 2]> = ids.iter().map(|id| store.key(memory_id(*id))).collect();
        if mode == Mode::Reset {
            for &key in &keys {
                store.remove(key);
            }
            return Ok([0.0; VALUES]);
        }
        if matches!(mode, Mode::Consume | Mode::Reward) {
            for &key in &keys {
                let Some(state) = store.get_mut(key) else {
                    continue;
                };
                algorithm.forget(state, now);
                if mode == Mode::Reward && algorithm.reward(state, call.weight, now) {
                    store.remove(key);
                }
            }
        }
        // The counts' buffer is reused from call to call (kept out of it only by an error).
        let mut counts = self.counts.take();
        counts.clear();
        for &key in &keys {
            algorithm.counts(store.get(key), now, &mut counts);
        }
        let (weight, charge) = match mode {
            // A reward answers as a peek of weight 1 afterwards.
            Mode::Reward => (1, false),
            _ => (call.weight, mode == Mode::Consume),
        };
        let verdict = algorithm.judge(ids.len(), &counts, weight, now, charge)?;
        self.counts.replace(counts);
        let start = !verdict.allowed && verdict.time_left != NEVER && algorithm.starts_on_refusal();
        if mode == Mode::Consume && (verdict.allowed || start) {
            let weight = if verdict.allowed { call.weight } else { 0 };
            for &key in &keys {
                let state = store.entry(key, now, |s, now| algorithm.is_idle(s, now));
                algorithm.add(state, weight, now);
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
            Mode::Reward => &batchers[2],
        };
        let sent_now = target.sent_now(call.now);
        let args = vec![
            keys.len().to_string(),
            now_text(sent_now),
            call.weight.to_string(),
        ];
        let algorithm = self.algorithm.clone();
        // A reward answers as a peek of weight 1 at the counts after the refund.
        let (ids, weight, charge) = match mode {
            Mode::Reward => (keys.len(), 1, false),
            _ => (keys.len(), call.weight, mode == Mode::Consume),
        };
        // (Its `now`, `""` on the server's clock, is argument 1: see `Lone::now_at`.)
        let lone = reply.lone().map(|lone| lone.with_now_at(1));
        batcher.submit(
            keys,
            args,
            Box::new(move |answer| {
                reply.send(answer.and_then(|answer| {
                    let now = sent_now.or(answer.server_now).ok_or_else(|| {
                        Failure::error(ErrorCode::StoreError, "the script answered no time")
                    })?;
                    let verdict = judge_reply(&algorithm, ids, weight, now, charge, answer.value)?;
                    Ok(verdict_values(
                        &verdict.counted_from_later(answer.server_now_lag),
                    ))
                }))
            }),
            lone,
        );
        Ok(())
    }
}

impl<A: Counting> FastRun for CountingEngine<A> {
    fn in_memory(&self) -> bool {
        matches!(self.backend, Backend::Memory(_))
    }

    fn run_fast(
        &self,
        env: &Env,
        mode: u32,
        id: &str,
        weight: f64,
        now: f64,
        ticket: Option<Ticket>,
    ) -> Outcome<FastRan> {
        let (Ok(mode), Some(call)) = (Mode::from_code(mode), fast_call_options(weight, now)) else {
            return Ok(FastRan::Declined);
        };
        // `reset` takes no options.
        if mode == Mode::Reset && (!weight.is_nan() || !now.is_nan()) {
            return Ok(FastRan::Declined);
        }
        match (&self.backend, ticket) {
            (Backend::Memory(store), None) => self
                .answer_in_memory(&mut store.borrow_mut(), &[Some(id)], call, mode)
                .map(FastRan::Answered),
            (Backend::Redis(target), Some(ticket)) => {
                let ids = [Some(id.to_owned())];
                self.answer_on_redis(env, ticket, target, &ids, call, mode)?;
                Ok(FastRan::Sent)
            }
            _ => Ok(FastRan::Declined),
        }
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

/// The script's counts for one call at `now` (a number when there is one, else an array),
/// judged.
fn judge_reply<A: Counting>(
    algorithm: &A,
    ids: usize,
    weight: u64,
    now: Micros,
    charge: bool,
    answer: redis::Value,
) -> Outcome<Verdict> {
    let counts: Vec<u64> = match answer {
        redis::Value::Int(count) => vec![count.max(0) as u64],
        answer => Vec::<i64>::from_redis_value(answer)
            .map_err(|e| {
                Failure::error(ErrorCode::StoreError, format!("the script answered: {e}"))
            })?
            .into_iter()
            .map(|count| count.max(0) as u64)
            .collect(),
    };
    algorithm.judge(ids, &counts, weight, now, charge)
}
