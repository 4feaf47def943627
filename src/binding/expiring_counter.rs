//! `ExpiringCounterEngine`: the expiring counter (`src/expiring_counter.rs`) on memory or Redis.
//!
//! `lib/flexible/` builds rate-limiter-flexible's API (`RateLimiterMemory`, `RateLimiterRedis`,
//! ...) on this, through `lib/engine.js`.

use std::sync::LazyLock;

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::{FromRedisValue, Script};

use super::backend::{local_now, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values};
use super::input::id;
use super::js_error;
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::expiring_counter::{self as counter, Counter, Reading};
use crate::store::batch::ScriptBatcher;
use crate::time::{millis_to_micros, now_argument, Micros, MAX_DURATION_MS};

static SCRIPT: LazyLock<Script> = lua_script!("expiring_counter");

/// The largest count a call may add or set: 2^53 - 1, the largest whole number a JavaScript
/// number holds exactly.
const MAX_POINTS: f64 = 9_007_199_254_740_991.0;

/// Options of an expiring counter.
///
/// ```js
/// new ExpiringCounterEngine({ namespace: 'rlflx:' }, store)
/// ```
#[napi(object)]
pub struct ExpiringCounterOptions {
    /// Prefix of the Redis keys: a key's count is a string at `namespace + key`. Default `''`
    /// (rate-limiter-flexible's layer passes whole keys, `keyPrefix:key`). Ignored in memory.
    pub namespace: Option<String>,
}

/// What `run` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Add,
    Set,
    Get,
    Delete,
}

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Add),
            1 => Ok(Mode::Set),
            2 => Ok(Mode::Get),
            3 => Ok(Mode::Delete),
            _ => Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                format!("unknown mode {code}"),
            )),
        }
    }

    fn script_name(self) -> &'static str {
        match self {
            Mode::Add => "add",
            Mode::Set => "set",
            Mode::Get => "get",
            Mode::Delete => "delete",
        }
    }
}

/// A call's arguments, checked.
struct Call {
    mode: Mode,
    points: i64,
    /// In milliseconds, 0 for never: fractions allowed.
    duration_ms: f64,
    now: Option<Micros>,
}

/// The answer's numbers: the points, the milliseconds left (-1 for never), 1 when the call
/// started the counter, 1 when the key holds a counter (0 for a `get` of none, when the other
/// numbers are 0 too). A `delete` answers 1 or 0, whether there was one, as its first number.
fn values(reading: Option<Reading>) -> Values {
    match reading {
        Some(reading) => [
            reading.points as f64,
            reading.left.map_or(-1.0, |left| left as f64 / 1000.0),
            f64::from(u8::from(reading.fresh)),
            1.0,
            0.0,
        ],
        None => [0.0; 5],
    }
}

/// A `delete`'s answer: 1 or 0, whether the key held a counter.
fn deleted_values(deleted: bool) -> Values {
    [f64::from(u8::from(deleted)), 0.0, 0.0, 0.0, 0.0]
}

/// A key's count and its expiry, counted from its first points: rate-limiter-flexible's layout
/// and arithmetic, in memory or on Redis: the native engine under `ratekeeper/flexible`, which is
/// the API to use.
#[napi(js_name = "ExpiringCounterEngine")]
pub struct JsExpiringCounter {
    backend: Backend<Option<Counter>>,
    batcher: Option<ScriptBatcher>,
}

#[napi]
impl JsExpiringCounter {
    /// Builds the counter in memory, or on `store` when one is given.
    /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "options: ExpiringCounterOptions & EngineStoreOptions, store?: RedisStore | null"
    )]
    pub fn new(env: Env, options: Unknown, store: Option<&JsRedisStore>) -> napi::Result<Self> {
        Self::build(options, store).map_err(|failure| js_error(&env, failure))
    }

    /// The engine's entry point: runs `mode` (0 add, 1 set, 2 get, 3 delete) for `key` with the
    /// call options `{ points, durationMs, now }` (points a whole number of at most 2^53 - 1 in
    /// size, default 0; durationMs from 0, for never, to 1e12, default 0). The answer comes as
    /// `RollingWindow.run` describes; its numbers are the points, the milliseconds left (-1 for
    /// never), whether the call started the counter, and whether the key holds one.
    #[napi(
        catch_unwind,
        ts_args_type = "mode: number, key: unknown, options: unknown, ticket: number, out: Float64Array"
    )]
    pub fn run(
        &self,
        env: Env,
        mode: u32,
        key: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        mut out: Float64ArraySlice,
    ) -> napi::Result<bool> {
        self.dispatch(&env, mode, key, options, ticket, &mut out)
            .map_err(|failure| js_error(&env, failure))
    }

    /// Sweeps the in-memory store when no call used it since the last time (keys whose counter
    /// has ended are given back even when no call comes): `lib/engine.js` calls it every
    /// `periodMs`. Nothing on Redis.
    #[napi(catch_unwind)]
    pub fn sweep_if_quiet(&self, period_ms: f64) {
        self.backend
            .sweep_if_quiet(millis_to_micros(period_ms), counter::is_idle);
    }

    /// How many keys the in-memory store holds (always `0` on Redis).
    #[napi(getter, catch_unwind)]
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    /// How many live keys the in-memory store evicted to stay within `maxKeys`.
    #[napi(getter, catch_unwind)]
    pub fn evicted_ids(&self) -> f64 {
        self.backend.memory_evictions() as f64
    }

    fn build(options: Unknown, store: Option<&JsRedisStore>) -> Outcome<Self> {
        let mut r = OptionsReader::new(
            Some(options),
            "ExpiringCounter options",
            ErrorCode::InvalidOption,
            false,
        )?;
        let backend = Backend::from_options(&mut r, store, "")?;
        r.finish()?;
        let batcher = match &backend {
            Backend::Redis(target) => Some(ScriptBatcher::new(
                dispatch::runtime().handle(),
                target.store.clone(),
                &SCRIPT,
                Vec::new(),
            )),
            Backend::Memory(_) => None,
        };
        Ok(Self { backend, batcher })
    }

    fn dispatch(
        &self,
        env: &Env,
        mode: u32,
        key: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        let ticket = Ticket::from_number(ticket)?;
        let key = id(key)?;
        let call = read_call(Mode::from_code(mode)?, options)?;
        match &self.backend {
            Backend::Memory(store) => {
                let answer = answer_in_memory(&mut store.borrow_mut(), &key, &call)?;
                dispatch::write_answer(out, answer)?;
                Ok(true)
            }
            Backend::Redis(target) => {
                self.answer_on_redis(env, ticket, target, &key, &call)?;
                Ok(false)
            }
        }
    }

    fn answer_on_redis(
        &self,
        env: &Env,
        ticket: Ticket,
        target: &RedisTarget,
        key: &str,
        call: &Call,
    ) -> Outcome<()> {
        let key = target.key(Some(key))?;
        let batcher = self.batcher.as_ref().ok_or_else(|| {
            Failure::error(
                ErrorCode::Internal,
                "a Redis limiter without its script batcher",
            )
        })?;
        let reply = dispatch::begin(env, ticket)?;
        // Redis keeps TTLs in whole milliseconds: a fraction is rounded up.
        let duration = format!("{}", call.duration_ms.ceil() as i64);
        let args = vec![
            call.mode.script_name().to_owned(),
            call.points.to_string(),
            duration,
        ];
        let (mode, lone) = (call.mode, reply.lone());
        batcher.submit(
            vec![key],
            args,
            Box::new(move |answer| {
                reply.send(answer.and_then(|answer| redis_values(mode, answer.value)))
            }),
            lone,
        );
        Ok(())
    }
}

fn read_call(mode: Mode, options: Option<Unknown>) -> Outcome<Call> {
    let mut r = OptionsReader::new(options, "call options", ErrorCode::InvalidArgument, true)?;
    let points = r.number("points")?.unwrap_or(0.0);
    let duration_ms = r.number("durationMs")?.unwrap_or(0.0);
    let now = r.number("now")?.map(now_argument).transpose()?;
    r.finish()?;
    if points.fract() != 0.0 || points.abs() > MAX_POINTS {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!("`points` must be a whole number of at most 2^53 - 1 in size, got {points}"),
        ));
    }
    if !(0.0..=MAX_DURATION_MS).contains(&duration_ms) {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!(
                "`durationMs` must be milliseconds from 0 (never expires) to {MAX_DURATION_MS:e}, got {duration_ms}"
            ),
        ));
    }
    Ok(Call {
        mode,
        points: points as i64,
        duration_ms,
        now,
    })
}

fn answer_in_memory(
    store: &mut crate::store::memory::MemoryStore<Option<Counter>>,
    key: &str,
    call: &Call,
) -> Outcome<Values> {
    let now = local_now(call.now);
    // A positive duration stays positive in whole microseconds.
    let duration = match millis_to_micros(call.duration_ms) {
        0 if call.duration_ms > 0.0 => 1,
        duration => duration,
    };
    Ok(match call.mode {
        Mode::Add => values(Some(counter::add(
            store.entry(key, now, counter::is_idle),
            call.points,
            duration,
            now,
        )?)),
        Mode::Set => values(Some(counter::set(
            store.entry(key, now, counter::is_idle),
            call.points,
            duration,
            now,
        ))),
        Mode::Get => values(store.get(key).and_then(|slot| counter::read(slot, now))),
        Mode::Delete => {
            let found = store
                .get(key)
                .is_some_and(|slot| counter::read(slot, now).is_some());
            store.remove(key);
            deleted_values(found)
        }
    })
}

/// The script's answer to one call (see `lua/expiring_counter.lua`) as the answer's numbers.
fn redis_values(mode: Mode, answer: redis::Value) -> Outcome<Values> {
    let wrong = |e: &dyn std::fmt::Display| {
        Failure::error(
            ErrorCode::StoreError,
            format!("the expiring counter's script answered: {e}"),
        )
    };
    if mode == Mode::Delete {
        let deleted = i64::from_redis_value(answer).map_err(|e| wrong(&e))?;
        return Ok(deleted_values(deleted > 0));
    }
    let reply = Vec::<i64>::from_redis_value(answer).map_err(|e| wrong(&e))?;
    match reply.as_slice() {
        [] => Ok(values(None)),
        &[points, left, fresh] => Ok(values(Some(Reading {
            points,
            // PTTL answers -1 for a key without a TTL, -2 for none (gone meanwhile: never here,
            // within the script).
            left: (left >= 0).then_some(left * 1000),
            fresh: fresh == 1,
        }))),
        _ => Err(wrong(&"not { points, ms left, started }")),
    }
}
