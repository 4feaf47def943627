//! `ExpiringCounterEngine`: the expiring counter (`src/expiring_counter.rs`) on memory or Redis.
//!
//! `lib/flexible/` builds rate-limiter-flexible's API (`RateLimiterMemory`, `RateLimiterRedis`,
//! ...) on this, through `lib/engine.js`.

use std::sync::LazyLock;

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::FromRedisValue;

use crate::store::script::LuaScript;

use super::backend::{local_now, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values};
use super::fast::{FastRan, FastRun};
use super::input::id;
use super::js_error;
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::expiring_counter::{self as counter, Counter, Reading};
use crate::store::batch::ScriptBatcher;
use crate::store::slot::check_one_slot;
use crate::time::{millis_to_micros, now_argument, Micros, MAX_DURATION_MS};

static SCRIPT: LazyLock<LuaScript> = lua_script!("expiring_counter");

/// The most keys one union call takes.
const MAX_UNION_KEYS: usize = 64;

/// The largest count a call may add or set: 2^53 - 1, the largest whole number a JavaScript
/// number holds exactly.
const MAX_POINTS: f64 = 9_007_199_254_740_991.0;

/// Options of an expiring counter.
///
/// ```js
/// new ExpiringCounterEngine({ namespace: 'rlflx:', durationMs: 60_000 }, store)
/// ```
#[napi(object)]
pub struct ExpiringCounterOptions {
    /// Prefix of the Redis keys: a key's count is a string at `namespace + key`. Default `''`
    /// (rate-limiter-flexible's layer passes whole keys, `keyPrefix:key`). Ignored in memory.
    pub namespace: Option<String>,
    /// The duration of a call that gives none, in milliseconds from 0 (never expires) to 1e12.
    /// Default `0`. The in-memory fast path (`fastPath`) always uses it.
    pub duration_ms: Option<f64>,
}

/// What `run` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Add,
    Set,
    Get,
    Delete,
    /// `add`, then past `limit` the window starts again, `growth` times longer per hit.
    AddOver,
}

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Add),
            1 => Ok(Mode::Set),
            2 => Ok(Mode::Get),
            3 => Ok(Mode::Delete),
            4 => Ok(Mode::AddOver),
            _ => Err(invalid_argument(format!("unknown mode {code}"))),
        }
    }

    fn script_name(self) -> &'static str {
        match self {
            Mode::Add => "add",
            Mode::Set => "set",
            Mode::Get => "get",
            Mode::Delete => "delete",
            Mode::AddOver => "over",
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
    /// `AddOver`'s: the count past which the window starts again, and by what it grows each time.
    over: Option<Over>,
}

#[derive(Clone, Copy)]
struct Over {
    limit: i64,
    growth: f64,
}

/// The largest growth `AddOver` takes (exponentialBackoff's is 2).
const MAX_GROWTH: f64 = 1e6;

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

/// One key's counter in memory, with the key itself, for `dump` (ids are otherwise kept only as
/// their hash).
#[derive(Default)]
struct Slot {
    counter: Option<Counter>,
    key: Box<str>,
}

fn is_idle(slot: &Slot, now: Micros) -> bool {
    counter::is_idle(&slot.counter, now)
}

/// A live counter of the in-memory store, as `dump` gives it.
#[napi(object)]
pub struct DumpedCounter {
    /// Its key, as it was given.
    pub key: String,
    /// The points it holds.
    pub points: f64,
    /// When it ends, in milliseconds since the epoch (of the calls' `now`); none when never.
    pub ends_at_ms: Option<f64>,
}

/// A key's count and its expiry, counted from its first points: rate-limiter-flexible's layout
/// and arithmetic, in memory or on Redis: the native engine under `ratekeeper/flexible`, which is
/// the API to use.
#[napi(js_name = "ExpiringCounterEngine")]
pub struct JsExpiringCounter {
    backend: Backend<Slot>,
    batcher: Option<ScriptBatcher>,
    /// `durationMs`: a call's duration when it gives none.
    duration_ms: f64,
}

crate::fast_path_method!(JsExpiringCounter);

impl FastRun for JsExpiringCounter {
    fn in_memory(&self) -> bool {
        matches!(self.backend, Backend::Memory(_))
    }

    /// On Redis `lib/flexible/counter.js` gives every call its duration, through `run` (whose
    /// call is numbers already): no `sendPath`.
    fn sends_fast(&self) -> bool {
        false
    }

    /// `weight` is the call's points; its duration is always the engine's `durationMs`. In
    /// memory only (see `sends_fast`).
    fn run_fast(
        &self,
        _env: &Env,
        mode: u32,
        id: &str,
        points: f64,
        now: f64,
        _ticket: Option<Ticket>,
    ) -> Outcome<FastRan> {
        let Backend::Memory(store) = &self.backend else {
            return Ok(FastRan::Declined);
        };
        let (Ok(mode), Ok(points)) = (Mode::from_code(mode), checked_points(points)) else {
            return Ok(FastRan::Declined);
        };
        if mode == Mode::AddOver {
            return Ok(FastRan::Declined);
        }
        let now = match now {
            now if now.is_nan() => None,
            now => match now_argument(now) {
                Ok(now) => Some(now),
                Err(_) => return Ok(FastRan::Declined),
            },
        };
        let call = Call {
            mode,
            points,
            duration_ms: self.duration_ms,
            now,
            over: None,
        };
        answer_in_memory(&mut store.borrow_mut(), id, &call).map(FastRan::Answered)
    }
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

    /// The engine's entry point: runs `mode` (0 add, 1 set, 2 get, 3 delete, 4 add over: an add
    /// after which a count past `limit` starts its window again, `growth` times longer for each
    /// hit further past it, at most 1e12 ms) for `key` with the call's numbers in `call`:
    /// `[points, durationMs, now, limit, growth]` (points and limit whole numbers of at most
    /// 2^53 - 1 in size; durationMs from 0, for never, to 1e12; now in milliseconds since the
    /// epoch, `NaN` for the clock's; limit and growth for mode 4 only, growth from 1 to 1e6, `NaN`
    /// for 1). Numbers, not an options object: `lib/flexible/counter.js` makes every call, and
    /// reading an object's properties through N-API cost more than the rest of the call's native
    /// work (about 1.4 µs of 2.3 in memory). The answer comes as `RollingWindow.run` describes;
    /// its numbers are the points, the milliseconds left (-1 for never), whether the call started
    /// the counter, and whether the key holds one.
    ///
    /// ```js
    /// engine.run(0, 'rlflx:user-1', new Float64Array([1, 60_000, NaN, NaN, NaN]), ticket, out)
    /// ```
    #[napi(
        catch_unwind,
        ts_args_type = "mode: number, key: unknown, call: Float64Array, ticket: number, out: Float64Array"
    )]
    pub fn run(
        &self,
        env: Env,
        mode: u32,
        key: Unknown,
        call: Float64ArraySlice,
        ticket: f64,
        mut out: Float64ArraySlice,
    ) -> napi::Result<bool> {
        self.dispatch(&env, mode, key, &call, ticket, &mut out)
            .map_err(|failure| js_error(&env, failure))
    }

    /// rate-limiter-flexible's RateLimiterUnion, atomic, on Redis: adds `points` to each of
    /// `keys` (1 to 64 whole Redis keys, on one Cluster slot), each starting its count for
    /// `durationsMs[i]` when absent, or to none when one would go over `limits[i]`; in one script
    /// call. Each key's answer comes under `tickets[i]`, as `run`'s: the points held (this call's
    /// included when none refused), the milliseconds left (-1 for never, 0 for no key, and 0 for
    /// a key that did not refuse in a union that another refused: not read), whether the call
    /// started the count, whether the key holds one, and whether it is one that refused.
    /// In memory (where each limiter has its own store) `lib/flexible/RateLimiterUnion.js`
    /// decides on its own, synchronously; this throws `ERR_INVALID_ARGUMENT` there.
    #[napi(catch_unwind)]
    pub fn union(
        &self,
        env: Env,
        keys: Vec<Unknown>,
        points: f64,
        limits: Vec<f64>,
        durations_ms: Vec<f64>,
        tickets: Vec<f64>,
    ) -> napi::Result<()> {
        self.union_on_redis(&env, keys, points, &limits, &durations_ms, &tickets)
            .map_err(|failure| js_error(&env, failure))
    }

    /// Sweeps the in-memory store when no call used it since the last time (keys whose counter
    /// has ended are given back even when no call comes): `lib/engine.js` calls it every
    /// `periodMs`. Nothing on Redis.
    #[napi(catch_unwind)]
    pub fn sweep_if_quiet(&self, period_ms: f64) {
        self.backend
            .sweep_if_quiet(millis_to_micros(period_ms), is_idle);
    }

    /// The in-memory store's live counters at `nowMs` (milliseconds since the epoch), for
    /// rate-limiter-flexible's `RateLimiterMemory.dump`. Throws `ERR_INVALID_ARGUMENT` on Redis.
    #[napi(catch_unwind)]
    pub fn dump(&self, env: Env, now_ms: f64) -> napi::Result<Vec<DumpedCounter>> {
        self.dump_memory(now_ms)
            .map_err(|failure| js_error(&env, failure))
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
        let duration_ms = checked_duration(r.number("durationMs")?.unwrap_or(0.0))?;
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
        Ok(Self {
            backend,
            batcher,
            duration_ms,
        })
    }

    fn dispatch(
        &self,
        env: &Env,
        mode: u32,
        key: Unknown,
        call: &[f64],
        ticket: f64,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        let ticket = Ticket::from_number(ticket)?;
        let key = id(key)?;
        let call = read_call(Mode::from_code(mode)?, call)?;
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
        // Redis keeps TTLs in whole milliseconds: a fraction is rounded up. An add over a limit
        // gives its limit and growth with it.
        let duration = match call.over {
            Some(Over { limit, growth }) => {
                format!("{} {limit} {growth}", call.duration_ms.ceil() as i64)
            }
            None => format!("{}", call.duration_ms.ceil() as i64),
        };
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

impl JsExpiringCounter {
    fn dump_memory(&self, now_ms: f64) -> Outcome<Vec<DumpedCounter>> {
        let Backend::Memory(store) = &self.backend else {
            return Err(invalid_argument("dump lists the in-memory store only"));
        };
        let now = now_argument(now_ms)?;
        Ok(store
            .borrow()
            .states()
            .filter_map(|slot| {
                let reading = counter::read(&slot.counter, now)?;
                Some(DumpedCounter {
                    key: slot.key.to_string(),
                    points: reading.points as f64,
                    ends_at_ms: reading.left.map(|left| (now + left) as f64 / 1000.0),
                })
            })
            .collect())
    }

    fn union_on_redis(
        &self,
        env: &Env,
        keys: Vec<Unknown>,
        points: f64,
        limits: &[f64],
        durations_ms: &[f64],
        tickets: &[f64],
    ) -> Outcome<()> {
        let (Backend::Redis(target), Some(batcher)) = (&self.backend, &self.batcher) else {
            return Err(invalid_argument(
                "the union runs on Redis only: in memory each limiter answers from its own store",
            ));
        };
        let count = keys.len();
        if !(1..=MAX_UNION_KEYS).contains(&count)
            || [limits.len(), durations_ms.len(), tickets.len()] != [count; 3]
        {
            return Err(invalid_argument(format!(
                "a union takes 1 to {MAX_UNION_KEYS} keys, each with its limit, duration and ticket"
            )));
        }
        let points = checked_points(points)?;
        let mut spec = String::new();
        for (&limit, &duration_ms) in limits.iter().zip(durations_ms) {
            if !limit.is_finite() {
                return Err(invalid_argument(format!(
                    "a union's limits must be finite, got {limit}"
                )));
            }
            checked_duration(duration_ms)?;
            spec.push_str(&format!("{limit} {} ", duration_ms.ceil() as i64));
        }
        let keys = keys
            .into_iter()
            .map(|key| target.key(Some(&id(key)?)))
            .collect::<Outcome<Vec<_>>>()?;
        check_one_slot(target.store.config(), &keys)?;
        let tickets = tickets
            .iter()
            .map(|&ticket| Ticket::from_number(ticket))
            .collect::<Outcome<Vec<_>>>()?;
        let replies = tickets
            .into_iter()
            .map(|ticket| dispatch::begin(env, ticket))
            .collect::<Outcome<Vec<_>>>()?;
        let args = vec!["union".to_owned(), points.to_string(), spec];
        // A lone union may take the direct lane: its one reply answers every ticket at once.
        let lone = replies.first().and_then(|reply| reply.lone());
        batcher.submit(
            keys,
            args,
            Box::new(move |answer| {
                match answer.and_then(|answer| union_values(answer.value, replies.len())) {
                    Ok(values) => replies
                        .into_iter()
                        .zip(values)
                        .for_each(|(reply, values)| reply.send(Ok(values))),
                    Err(failure) => replies
                        .into_iter()
                        .for_each(|reply| reply.send(Err(failure.clone()))),
                }
            }),
            lone,
        );
        Ok(())
    }
}

fn invalid_argument(message: impl Into<String>) -> Failure {
    Failure::range_error(ErrorCode::InvalidArgument, message)
}

/// A count to add or set, as a whole number of at most 2^53 - 1 in size.
fn checked_points(points: f64) -> Outcome<i64> {
    if points.fract() != 0.0 || points.abs() > MAX_POINTS {
        return Err(invalid_argument(format!(
            "`points` must be a whole number of at most 2^53 - 1 in size, got {points}"
        )));
    }
    Ok(points as i64)
}

/// A duration in milliseconds, from 0 (never expires) to [`MAX_DURATION_MS`].
fn checked_duration(duration_ms: f64) -> Outcome<f64> {
    if !(0.0..=MAX_DURATION_MS).contains(&duration_ms) {
        return Err(invalid_argument(format!(
            "`durationMs` must be milliseconds from 0 (never expires) to {MAX_DURATION_MS:e}, got {duration_ms}"
        )));
    }
    Ok(duration_ms)
}

/// A call's numbers (see `run`), checked.
fn read_call(mode: Mode, numbers: &[f64]) -> Outcome<Call> {
    let &[points, duration_ms, now, limit, growth] = numbers else {
        return Err(invalid_argument(format!(
            "a call's numbers are [points, durationMs, now, limit, growth], got {} numbers",
            numbers.len()
        )));
    };
    let now = (!now.is_nan()).then(|| now_argument(now)).transpose()?;
    let over = if mode == Mode::AddOver {
        if limit.is_nan() {
            return Err(invalid_argument(
                "an add over a limit needs its `limit`, a whole number",
            ));
        }
        let growth = if growth.is_nan() { 1.0 } else { growth };
        if !(1.0..=MAX_GROWTH).contains(&growth) {
            return Err(invalid_argument(format!(
                "`growth` must be a number from 1 to {MAX_GROWTH:e}, got {growth}"
            )));
        }
        Some(Over {
            limit: checked_points(limit)?,
            growth,
        })
    } else {
        None
    };
    Ok(Call {
        mode,
        points: checked_points(points)?,
        duration_ms: checked_duration(duration_ms)?,
        now,
        over,
    })
}

/// The counter of `key`, to write: its slot keeps the key, for `dump`.
fn written<'a>(
    store: &'a mut crate::store::memory::MemoryStore<Slot>,
    key: &str,
    now: Micros,
) -> &'a mut Option<Counter> {
    let slot = store.entry(key, now, is_idle);
    if slot.key.is_empty() {
        slot.key = key.into();
    }
    &mut slot.counter
}

fn answer_in_memory(
    store: &mut crate::store::memory::MemoryStore<Slot>,
    key: &str,
    call: &Call,
) -> Outcome<Values> {
    let now = local_now(call.now);
    // A positive duration stays positive in whole microseconds.
    let duration = match millis_to_micros(call.duration_ms) {
        0 if call.duration_ms > 0.0 => 1,
        duration => duration,
    };
    Ok(match (call.mode, call.over) {
        (Mode::AddOver, Some(over)) => values(Some(counter::add_over(
            written(store, key, now),
            call.points,
            duration,
            now,
            over.limit,
            over.growth,
            millis_to_micros(MAX_DURATION_MS),
        )?)),
        (Mode::Add | Mode::AddOver, _) => values(Some(counter::add(
            written(store, key, now),
            call.points,
            duration,
            now,
        )?)),
        (Mode::Set, _) => values(Some(counter::set(
            written(store, key, now),
            call.points,
            duration,
            now,
        ))),
        (Mode::Get, _) => values(
            store
                .get(key)
                .and_then(|slot| counter::read(&slot.counter, now)),
        ),
        (Mode::Delete, _) => {
            let found = store
                .get(key)
                .is_some_and(|slot| counter::read(&slot.counter, now).is_some());
            store.remove(key);
            deleted_values(found)
        }
    })
}

fn wrong_answer(e: &dyn std::fmt::Display) -> Failure {
    Failure::error(
        ErrorCode::StoreError,
        format!("the expiring counter's script answered: {e}"),
    )
}

/// The script's answer to a union of `count` keys (four numbers per key, one key after the
/// other): each key's numbers, as `values` gives them, with a fifth, 1 for a key that refused.
fn union_values(answer: redis::Value, count: usize) -> Outcome<Vec<Values>> {
    let numbers = Vec::<i64>::from_redis_value(answer).map_err(|e| wrong_answer(&e))?;
    if numbers.len() != 4 * count {
        return Err(wrong_answer(&format!(
            "{} numbers for {count} keys, not 4 per key",
            numbers.len()
        )));
    }
    Ok(numbers
        .chunks_exact(4)
        .map(|key| {
            let [points, left, fresh, refused] = [key[0], key[1], key[2], key[3]];
            let found = left != -2;
            let left = match left {
                -2 => 0.0,
                -1 => -1.0,
                left => left as f64,
            };
            [
                points as f64,
                left,
                f64::from(u8::from(fresh == 1)),
                f64::from(u8::from(found)),
                refused as f64,
            ]
        })
        .collect())
}

/// The script's answer to one call (see `lua/expiring_counter.lua`) as the answer's numbers.
fn redis_values(mode: Mode, answer: redis::Value) -> Outcome<Values> {
    if mode == Mode::Delete {
        let deleted = i64::from_redis_value(answer).map_err(|e| wrong_answer(&e))?;
        return Ok(deleted_values(deleted > 0));
    }
    let reply = Vec::<i64>::from_redis_value(answer).map_err(|e| wrong_answer(&e))?;
    match reply.as_slice() {
        [] => Ok(values(None)),
        &[points, left, fresh] => Ok(values(Some(Reading {
            points,
            // PTTL answers -1 for a key without a TTL, -2 for none (gone meanwhile: never here,
            // within the script).
            left: (left >= 0).then_some(left * 1000),
            fresh: fresh == 1,
        }))),
        _ => Err(wrong_answer(&"not { points, ms left, started }")),
    }
}
