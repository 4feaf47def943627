//! `BucketCircleEngine`: redback's `RateLimit` (`src/bucket_circle.rs`) on memory or Redis.
//!
//! `lib/redback.js` builds redback's API (`createRateLimit`, `add`, `count`, `addCount`) on this,
//! through `lib/engine.js`.

use std::sync::LazyLock;

use napi::bindgen_prelude::{Float64ArraySlice, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::FromRedisValue;

use crate::store::script::LuaScript;

use super::backend::{local_now, memory_id, Backend, RedisTarget};
use super::dispatch::{self, Ticket, Values};
use super::fast::{FastRan, FastRun};
use super::input::id;
use super::js_error;
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use crate::bucket_circle::{BucketCircle, Circle};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::batch::ScriptBatcher;
use crate::store::memory::MemoryStore;
use crate::time::{millis_to_micros, now_argument, Micros};

static SCRIPT: LazyLock<LuaScript> = lua_script!("bucket_circle");

/// Options of redback's `RateLimit`, in seconds as redback takes them.
#[napi(object)]
pub struct BucketCircleOptions {
    /// The circle's size. Default `600`.
    pub bucket_span: Option<f64>,
    /// Each bucket's size; `bucket_span` must be a multiple of it. Default `5`.
    pub bucket_interval: Option<f64>,
    /// How long an idle subject is kept. Default `1200`.
    pub subject_expiry: Option<f64>,
    /// The key prefix, `[namespace:]action:` (a subject's hash is at `namespace + subject`).
    pub namespace: Option<String>,
}

/// What `run` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Add,
    Count,
    AddCount,
    /// Reads the subject and options only, for an add of many subjects: all are checked before
    /// any is counted.
    Check,
}

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Add),
            1 => Ok(Mode::Count),
            2 => Ok(Mode::AddCount),
            3 => Ok(Mode::Check),
            _ => Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                format!("unknown mode {code}"),
            )),
        }
    }

    fn script_name(self) -> &'static str {
        match self {
            Mode::Add => "add",
            Mode::Count => "count",
            Mode::AddCount => "addcount",
            Mode::Check => "check",
        }
    }
}

/// The count as the first of the answer's numbers.
fn values(count: u64) -> Values {
    [count as f64, 0.0, 0.0, 0.0, 0.0]
}

/// redback's `RateLimit`, in memory or on Redis: the native engine under `createRateLimit`
/// (see index.d.ts), which is the API to use.
#[napi(js_name = "BucketCircleEngine")]
pub struct JsBucketCircle {
    circle: BucketCircle,
    backend: Backend<Circle>,
    batcher: Option<ScriptBatcher>,
}

crate::fast_path_method!(JsBucketCircle);

/// The fast path's number is redback's `interval` (seconds) of a count, `NaN` for an add.
impl FastRun for JsBucketCircle {
    fn in_memory(&self) -> bool {
        matches!(self.backend, Backend::Memory(_))
    }

    fn run_fast(
        &self,
        env: &Env,
        mode: u32,
        id: &str,
        interval: f64,
        now: f64,
        ticket: Option<Ticket>,
    ) -> Outcome<FastRan> {
        let Ok(mode) = Mode::from_code(mode) else {
            return Ok(FastRan::Declined);
        };
        let now = if now.is_nan() {
            None
        } else {
            match now_argument(now) {
                Ok(now) => Some(now),
                Err(_) => return Ok(FastRan::Declined),
            }
        };
        let lookback = match (mode, interval.is_nan()) {
            (Mode::Add, true) => 0,
            (Mode::Count | Mode::AddCount, false) => match self.circle.lookback(interval) {
                Ok(lookback) => lookback,
                Err(_) => return Ok(FastRan::Declined),
            },
            _ => return Ok(FastRan::Declined),
        };
        match (&self.backend, ticket) {
            (Backend::Memory(store), None) => {
                let count = self.answer_in_memory(
                    &mut store.borrow_mut(),
                    Some(id),
                    local_now(now),
                    mode,
                    lookback,
                );
                Ok(FastRan::Answered(values(count)))
            }
            (Backend::Redis(target), Some(ticket)) => {
                self.answer_on_redis(env, ticket, target, Some(id), now, mode, lookback)?;
                Ok(FastRan::Sent)
            }
            _ => Ok(FastRan::Declined),
        }
    }
}

#[napi]
impl JsBucketCircle {
    /// Builds redback's rate limit in memory, or on `store` when one is given.
    /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "options: BucketCircleOptions & EngineStoreOptions, store?: RedisStore | null"
    )]
    pub fn new(env: Env, options: Unknown, store: Option<&JsRedisStore>) -> napi::Result<Self> {
        Self::build(options, store).map_err(|failure| js_error(&env, failure))
    }

    /// The engine under redback's API: runs `mode` (0 add, 1 count, 2 addCount) for `subject`
    /// with the call options `{ now, interval }` (interval in seconds, for counts). The count is
    /// the first number of the answer, which comes as `RollingWindow.run` describes.
    #[napi(
        catch_unwind,
        ts_args_type = "mode: number, subject: unknown, options: unknown, ticket: number, out: Float64Array"
    )]
    pub fn run(
        &self,
        env: Env,
        mode: u32,
        subject: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        mut out: Float64ArraySlice,
    ) -> napi::Result<bool> {
        self.dispatch(&env, mode, subject, options, ticket, &mut out)
            .map_err(|failure| js_error(&env, failure))
    }

    /// Sweeps the in-memory store when no call used it since the last time (ids gone idle are
    /// given back even when no call comes): `lib/engine.js` calls it every `periodMs`. Nothing
    /// on Redis.
    #[napi(catch_unwind)]
    pub fn sweep_if_quiet(&self, period_ms: f64) {
        let circle = &self.circle;
        self.backend
            .sweep_if_quiet(millis_to_micros(period_ms), |c, now| c.is_idle(circle, now));
    }

    /// How many subjects the in-memory store holds (always `0` on Redis).
    #[napi(getter, catch_unwind)]
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    /// How many active subjects the in-memory store evicted to stay within `maxKeys`.
    #[napi(getter, catch_unwind)]
    pub fn evicted_ids(&self) -> f64 {
        self.backend.memory_evictions() as f64
    }

    fn build(options: Unknown, store: Option<&JsRedisStore>) -> Outcome<Self> {
        let mut r = OptionsReader::new(
            Some(options),
            "RateLimit options",
            ErrorCode::InvalidOption,
            false,
        )?;
        let span = r.number("bucket_span")?.unwrap_or(600.0);
        let interval = r.number("bucket_interval")?.unwrap_or(5.0);
        let expiry = r.number("subject_expiry")?.unwrap_or(1200.0);
        let backend = Backend::from_options(&mut r, store, "")?;
        r.finish()?;
        let circle = BucketCircle::new(span, interval, expiry)?;
        let batcher = match &backend {
            Backend::Redis(target) => Some(ScriptBatcher::new(
                dispatch::runtime().handle(),
                target.store.clone(),
                &SCRIPT,
                vec![
                    circle.interval().to_string(),
                    circle.buckets().to_string(),
                    circle.expiry_seconds.to_string(),
                    String::new(),
                ],
            )),
            Backend::Memory(_) => None,
        };
        Ok(Self {
            circle,
            backend,
            batcher,
        })
    }

    fn dispatch(
        &self,
        env: &Env,
        mode: u32,
        subject: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        let ticket = Ticket::from_number(ticket)?;
        let mode = Mode::from_code(mode)?;
        let subject = Some(id(subject)?);
        let mut r = OptionsReader::new(options, "call options", ErrorCode::InvalidArgument, true)?;
        let now = r.number("now")?.map(now_argument).transpose()?;
        let interval = r.number("interval")?;
        r.finish()?;
        let lookback = match (mode, interval) {
            (Mode::Check, _) => return Ok(true),
            (Mode::Add, _) => 0,
            (_, Some(interval)) => self.circle.lookback(interval)?,
            (_, None) => return Err(missing_interval()),
        };
        match &self.backend {
            Backend::Memory(store) => {
                let count = self.answer_in_memory(
                    &mut store.borrow_mut(),
                    subject.as_deref(),
                    local_now(now),
                    mode,
                    lookback,
                );
                dispatch::write_answer(out, values(count))?;
                Ok(true)
            }
            Backend::Redis(target) => {
                self.answer_on_redis(env, ticket, target, subject.as_deref(), now, mode, lookback)?;
                Ok(false)
            }
        }
    }

    fn answer_in_memory(
        &self,
        store: &mut MemoryStore<Circle>,
        subject: Option<&str>,
        now: Micros,
        mode: Mode,
        lookback: i64,
    ) -> u64 {
        let circle = &self.circle;
        let subject = memory_id(subject);
        if mode != Mode::Count {
            store
                .entry(subject, now, |c, now| c.is_idle(circle, now))
                .add(circle, now);
        }
        match (mode, store.get(subject)) {
            (Mode::Add, _) | (_, None) => 0,
            (_, Some(c)) => c.count(circle, now, lookback),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn answer_on_redis(
        &self,
        env: &Env,
        ticket: Ticket,
        target: &RedisTarget,
        subject: Option<&str>,
        now: Option<Micros>,
        mode: Mode,
        lookback: i64,
    ) -> Outcome<()> {
        let key = target.key(subject)?;
        let batcher = self.batcher.as_ref().ok_or_else(|| {
            Failure::error(
                ErrorCode::Internal,
                "a Redis limiter without its script batcher",
            )
        })?;
        let reply = dispatch::begin(env, ticket)?;
        let args = vec![
            mode.script_name().to_owned(),
            target.now_argument(now),
            lookback.to_string(),
        ];
        let circle = self.circle;
        let lone = reply.lone();
        batcher.submit(
            vec![key],
            args,
            Box::new(move |answer| {
                reply.send(
                    answer.and_then(|answer| count_reply(&circle, mode, lookback, answer.value)),
                )
            }),
            lone,
        );
        Ok(())
    }
}

fn missing_interval() -> Failure {
    Failure::type_error(
        ErrorCode::InvalidArgument,
        "`interval` is required to count: pass the number of seconds to look back",
    )
}

/// The script's `{ now, last, counts... }`, summed over the buckets that count.
fn count_reply(
    circle: &BucketCircle,
    mode: Mode,
    lookback: i64,
    answer: redis::Value,
) -> Outcome<Values> {
    let reply = Vec::<i64>::from_redis_value(answer).map_err(|e| {
        Failure::error(
            ErrorCode::StoreError,
            format!("the RateLimit script answered: {e}"),
        )
    })?;
    if mode == Mode::Add {
        return Ok(values(0));
    }
    let [now, last, counts @ ..] = reply.as_slice() else {
        return Err(Failure::error(
            ErrorCode::StoreError,
            "the RateLimit script answered too little",
        ));
    };
    let current = circle.absolute(*now);
    let counted = circle.counted(*now, lookback, (*last >= 0).then_some(*last));
    let count = (current - lookback..=current)
        .zip(counts)
        .filter(|(bucket, _)| counted.contains(bucket))
        .map(|(_, &count)| count.max(0) as u64)
        .sum();
    Ok(values(count))
}
