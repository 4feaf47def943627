//! `FixedWindowEngine`: fixed window counters (`src/fixed_window.rs`) on memory or Redis.
//!
//! `lib/fixed-window.js` builds the `FixedWindow` class (`consume`, `peek`, `reset`) on this,
//! through `lib/engine.js`.

use std::sync::LazyLock;

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::{FromRedisValue, Script};

use super::backend::{local_now, memory_id, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values, VALUES};
use super::input::{call_options, ids, CallOptions};
use super::js_error;
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::{Counters, FixedWindow};
use crate::store::memory::MemoryStore;
use crate::store::redis::{check_one_slot, ScriptBatcher};
use crate::time::Micros;
use crate::verdict::Verdict;

static SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/fixed_window.lua")));

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
    /// Prefix of the Redis keys: an id's counters are a hash at `namespace + id`.
    /// Default `'ratekeeper:fixed:'`. Ignored in memory.
    pub namespace: Option<String>,
    /// On Redis, whose clock decides when no `now` is given: `'redis'` (the default) or
    /// `'local'`.
    pub clock: Option<String>,
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

/// A verdict as numbers: allowed (1 or 0), the wait and the reset in milliseconds (rounded up;
/// the wait is Infinity when the weight exceeds a limit), the remaining weight and its limit.
fn values(verdict: &Verdict) -> Values {
    [
        f64::from(u8::from(verdict.allowed)),
        verdict.time_left_millis(),
        verdict.remaining as f64,
        verdict.limit as f64,
        verdict.reset_after_millis(),
    ]
}

/// Fixed window counters, in memory or on Redis: the native engine under `FixedWindow` (see
/// index.d.ts), which is the API to use. It validates its options like `FixedWindow` does.
#[napi(js_name = "FixedWindowEngine")]
pub struct JsFixedWindow {
    limiter: FixedWindow,
    backend: Backend<Counters>,
    /// On Redis: the script's batchers for consuming and for peeking.
    batchers: Option<[ScriptBatcher; 2]>,
}

#[napi]
impl JsFixedWindow {
    /// Builds fixed window counters in memory, or on `store` when one is given.
    /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "options: FixedWindowOptions, store?: RedisStore | null"
    )]
    pub fn new(env: Env, options: Unknown, store: Option<&JsRedisStore>) -> napi::Result<Self> {
        Self::build(options, store).map_err(|failure| js_error(&env, failure))
    }

    /// The engine under `FixedWindow`: runs `mode` (0 consume, 1 peek, 2 reset) for one id or
    /// an array of ids, with the call options `{ now, weight }`. Answers as
    /// `RollingWindow.run` does; the five numbers are allowed, timeLeft, remaining, limit and
    /// resetAfter.
    #[napi(
        catch_unwind,
        ts_args_type = "mode: number, ids: unknown, options: unknown, ticket: number, out: Float64Array"
    )]
    pub fn run(
        &self,
        env: Env,
        mode: u32,
        ids: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        mut out: Float64ArraySlice,
    ) -> napi::Result<bool> {
        Ticket::from_number(ticket)
            .and_then(|ticket| self.dispatch(&env, mode, ids, options, ticket, &mut out))
            .map_err(|failure| js_error(&env, failure))
    }

    /// How many ids the in-memory store holds counters for (always `0` on Redis).
    #[napi(getter, catch_unwind)]
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    fn build(options: Unknown, store: Option<&JsRedisStore>) -> Outcome<Self> {
        let mut r = OptionsReader::new(
            Some(options),
            "FixedWindow options",
            ErrorCode::InvalidOption,
            false,
        )?;
        let limits = r
            .objects("limits", |limit| {
                Ok((
                    limit.required_number("duration")?,
                    limit.required_number("limit")?,
                ))
            })?
            .ok_or_else(|| r.missing("limits", "an array of { duration, limit }"))?;
        let backend = Backend::from_options(&mut r, store, "ratekeeper:fixed:")?;
        r.finish()?;
        let limiter = FixedWindow::new(&limits)?;
        let batchers = match &backend {
            Backend::Redis(target) => Some([
                batcher(&limiter, target, "consume"),
                batcher(&limiter, target, "peek"),
            ]),
            Backend::Memory(_) => None,
        };
        Ok(Self {
            limiter,
            backend,
            batchers,
        })
    }

    fn dispatch(
        &self,
        env: &Env,
        mode: u32,
        ids: Unknown,
        options: Option<Unknown>,
        ticket: Ticket,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        let mode = Mode::from_code(mode)?;
        let ids = self::ids(ids)?;
        let call = call_options(options, true)?;
        match &self.backend {
            Backend::Memory(store) => {
                let answer = self.answer_in_memory(&mut store.borrow_mut(), &ids, call, mode);
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
        store: &mut MemoryStore<Counters>,
        ids: &[Option<String>],
        call: CallOptions,
        mode: Mode,
    ) -> Values {
        let now = local_now(call.now);
        let limiter = &self.limiter;
        if mode == Mode::Reset {
            for id in ids {
                store.remove(memory_id(id.as_deref()));
            }
            return [0.0; VALUES];
        }
        let mut counts = Vec::with_capacity(ids.len() * limiter.limits().len());
        for id in ids {
            match store.get(memory_id(id.as_deref())) {
                Some(counters) => counters.counts_at(limiter, now, &mut counts),
                None => Counters::default().counts_at(limiter, now, &mut counts),
            }
        }
        let verdict = limiter.judge(&counts, call.weight, now);
        if mode == Mode::Consume && verdict.allowed {
            for id in ids {
                store
                    .entry(memory_id(id.as_deref()), now, |c, now| {
                        c.is_idle(limiter, now)
                    })
                    .add(limiter, call.weight, now);
            }
        }
        values(&verdict)
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
        let limiter = self.limiter.clone();
        let weight = call.weight;
        batcher.submit(
            keys,
            args,
            Box::new(move |answer| {
                reply.send(answer.and_then(|answer| answer_values(&limiter, weight, answer)))
            }),
        );
        Ok(())
    }
}

/// The batcher of one mode of the script, with the limits as the shared arguments.
fn batcher(limiter: &FixedWindow, target: &RedisTarget, mode: &str) -> ScriptBatcher {
    let limits = limiter.limits();
    let longest = limits.iter().map(|l| l.duration).max().unwrap_or(0);
    let mut shared = vec![limits.len().to_string()];
    for limit in limits {
        shared.push(limit.duration.to_string());
        shared.push(limit.limit.to_string());
    }
    shared.push(mode.to_owned());
    // The hash outlives its longest window by a second (clock skew, tests' `now`).
    shared.push((longest / 1000 + 1000).to_string());
    ScriptBatcher::new(
        dispatch::runtime().handle(),
        target.store.clone(),
        &SCRIPT,
        shared,
    )
}

/// The script's `{ now, counts... }` for one call, judged.
fn answer_values(limiter: &FixedWindow, weight: u64, answer: redis::Value) -> Outcome<Values> {
    let reply = Vec::<i64>::from_redis_value(answer).map_err(|e| {
        Failure::error(
            ErrorCode::StoreError,
            format!("the fixed window script answered: {e}"),
        )
    })?;
    let (&now, counts) = reply.split_first().ok_or_else(|| {
        Failure::error(
            ErrorCode::StoreError,
            "the fixed window script answered nothing",
        )
    })?;
    let counts: Vec<u64> = counts.iter().map(|&c| c.max(0) as u64).collect();
    Ok(values(&limiter.judge(&counts, weight, now as Micros)))
}
