//! `RollingWindow`: the rolling window (`src/rolling_window.rs`) on memory or Redis.
//!
//! `lib/rolling-rate-limiter.js` builds rolling-rate-limiter's API (`RateLimiter`, `RedisRateLimiter`, the
//! callback form) on this class, through `lib/engine.js`.

use std::sync::{Arc, LazyLock};

use napi::bindgen_prelude::{Float64ArraySlice, PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::FromRedisValue;

use crate::store::script::LuaScript;

use super::backend::{local_now, memory_id, now_text, Backend, RedisTarget};
use super::counting::verdict_values;
use super::dispatch::{self, Ticket, Values, VALUES};
use super::fast::{FastRan, FastRun};
use super::input::{call_options, fast_call_options, id, optional_id, CallOptions, Takes};
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use super::{js_error, rejected};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::rolling_window::{
    check_logged_weight, LogFacts, RollingWindow, Timeline, WindowFacts, WindowInfo,
};
use crate::store::batch::ScriptBatcher;
use crate::store::memory::MemoryStore;
use crate::store::redis::unique_member;
use crate::time::{millis_to_micros, Micros};

static SCRIPT: LazyLock<LuaScript> = lua_script!("rolling_window");

/// Options of a rolling window (those of rolling-rate-limiter 0.4, plus ours).
///
/// ```js
/// new RollingWindow({ interval: 60_000, maxInInterval: 10, minDifference: 1000 })
/// ```
#[napi(object)]
pub struct RollingWindowOptions {
    /// The window's length in milliseconds (> 0). Required.
    pub interval: f64,
    /// How many actions the window admits: a whole number from 1 to 1e15. Required. Every action in the window is an entry of the id's log (about 24 to 48 bytes in memory, 140 on Redis).
    /// A sliding log's call logs at most 10,000 actions (`weight`).
    pub max_in_interval: f64,
    /// The least time between two consecutive actions, in milliseconds. Default `0` (none).
    pub min_difference: Option<f64>,
    /// Whether blocked attempts are recorded and count against later ones, as in
    /// rolling-rate-limiter. Default `true`; with `false`, a client that keeps calling too fast
    /// still gets its share of actions through, and a refusal reports the wait and the actions
    /// remaining of the log without it.
    pub record_blocked: Option<bool>,
    /// Prefix of the Redis keys (the key of an id is `namespace + id`, as in
    /// rolling-rate-limiter). Default `'ratekeeper:'`. Ignored in memory.
    pub namespace: Option<String>,
}

/// The sorted-set rolling window of rolling-rate-limiter, in memory or on Redis: the native
/// engine under `RateLimiter`, `InMemoryRateLimiter` and `RedisRateLimiter`, which are the API
/// to use (see index.d.ts). It validates its options like they do.
///
/// ```js
/// const { RateLimiter } = require('ratekeeper')
/// const limiter = new RateLimiter({ interval: 1000, maxInInterval: 2 })
/// limiter.window // a RollingWindow
/// ```
#[napi(js_name = "RollingWindow")]
pub struct JsRollingWindow {
    window: RollingWindow,
    backend: Backend<Timeline>,
    /// On Redis: the script's batchers, one per mode of [`SCRIPT_MODES`].
    batchers: Option<Vec<ScriptBatcher>>,
}

/// What `run` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Attempt an action and record it (`limitWithInfo`).
    Limit,
    /// Answer as `Limit` would, recording nothing (`wouldLimitWithInfo`).
    Peek,
    /// Forget the id (`clear`, `reset`).
    Clear,
    /// The sliding log: log the actions if allowed (`consume`).
    Consume,
    /// Answer as `Consume` would, logging nothing (`peek`).
    Check,
    /// Forget the newest `weight` actions, then answer as `Check` of weight 1 (`reward`).
    Reward,
}

/// Added to a mode of `run`: a call without an id counts against the limiter's one global
/// limit (the callback API of the ClassDojo post) instead of failing with `ERR_INVALID_ID`.
const GLOBAL_WHEN_NO_ID: u32 = 16;

impl Mode {
    fn from_code(code: u32) -> Outcome<Self> {
        match code {
            0 => Ok(Mode::Limit),
            1 => Ok(Mode::Peek),
            2 => Ok(Mode::Clear),
            3 => Ok(Mode::Consume),
            4 => Ok(Mode::Check),
            5 => Ok(Mode::Reward),
            _ => Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                format!("unknown mode {code}"),
            )),
        }
    }

    /// The index of the mode's batcher in [`SCRIPT_MODES`] (clearing needs none).
    fn batcher(self) -> Option<usize> {
        match self {
            Mode::Limit => Some(0),
            Mode::Peek => Some(1),
            Mode::Consume => Some(2),
            Mode::Check => Some(3),
            Mode::Reward => Some(4),
            Mode::Clear => None,
        }
    }
}

/// The script's modes, one batcher each; "entries" is the last.
const SCRIPT_MODES: [&str; 6] = ["limit", "peek", "consume", "check", "reward", "entries"];
const ENTRIES: usize = 5;

/// One logged action, as `entries` returns it.
#[napi(object)]
pub struct LogEntry {
    /// When, in milliseconds since the epoch.
    pub at: f64,
    /// The metadata given with it (`consume(id, { meta })`), if any.
    pub meta: Option<String>,
}

impl LogEntry {
    fn new(at: Micros, meta: Option<&str>) -> Self {
        Self {
            at: at as f64 / 1000.0,
            meta: meta.map(str::to_owned),
        }
    }
}

/// An answer as numbers: flags (1 blocked, 2 by count, 4 by minDifference), the wait in whole
/// milliseconds, and the actions remaining. `lib/rolling-rate-limiter.js` decodes them.
fn values(info: &WindowInfo) -> Values {
    let flags = u8::from(info.blocked)
        | u8::from(info.blocked_due_to_count) << 1
        | u8::from(info.blocked_due_to_min_difference) << 2;
    [
        f64::from(flags),
        info.millis_until_allowed() as f64,
        info.actions_remaining as f64,
        0.0,
        0.0,
    ]
}

crate::fast_path_method!(JsRollingWindow);

impl FastRun for JsRollingWindow {
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
        let (Ok(mode), Some(call)) = (
            Mode::from_code(mode & !GLOBAL_WHEN_NO_ID),
            fast_call_options(weight, now),
        ) else {
            return Ok(FastRan::Declined);
        };
        let takes_weight = matches!(mode, Mode::Consume | Mode::Check | Mode::Reward);
        let takes_now = mode != Mode::Clear;
        if (!takes_weight && !weight.is_nan())
            || (!takes_now && !now.is_nan())
            || checked_weight(mode, &call).is_err()
        {
            return Ok(FastRan::Declined);
        }
        match (&self.backend, ticket) {
            (Backend::Memory(store), None) => Ok(FastRan::Answered(self.answer_in_memory(
                &mut store.borrow_mut(),
                Some(id),
                call,
                mode,
            ))),
            (Backend::Redis(target), Some(ticket)) => {
                self.answer_on_redis(env, ticket, target, Some(id), call, mode)?;
                Ok(FastRan::Sent)
            }
            _ => Ok(FastRan::Declined),
        }
    }
}

#[napi]
impl JsRollingWindow {
    /// Builds a rolling window in memory, or on `store` when one is given.
    /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "options: RollingWindowOptions & EngineStoreOptions, store?: RedisStore | null"
    )]
    pub fn new(env: Env, options: Unknown, store: Option<&JsRedisStore>) -> napi::Result<Self> {
        Self::build(options, store).map_err(|failure| js_error(&env, failure))
    }

    /// The engine under `RateLimiter`: runs `mode` (0 attempt, 1 peek, 2 clear, 3 consume,
    /// 4 check, 5 reward; plus 16 to let a missing id mean the one global limit) for `id` with the call
    /// options `{ now }`.
    ///
    /// In memory the answer is written to `out` (flags, wait in ms, actions remaining) and
    /// `true` is returned. On Redis, `false` is returned and the answer reaches the handler of
    /// `ticket` (`channel * 2 ** 32 + token`, `channel` from `setAnswerHandler`). Bad arguments throw `ERR_INVALID_ID` or
    /// `ERR_INVALID_ARGUMENT`. Use `RateLimiter`'s methods rather than this.
    #[napi(
        catch_unwind,
        ts_args_type = "mode: number, id: unknown, options: unknown, ticket: number, out: Float64Array"
    )]
    pub fn run(
        &self,
        env: Env,
        mode: u32,
        id: Unknown,
        options: Option<Unknown>,
        ticket: f64,
        mut out: Float64ArraySlice,
    ) -> napi::Result<bool> {
        Ticket::from_number(ticket)
            .and_then(|ticket| self.dispatch(&env, mode, id, options, ticket, &mut out))
            .map_err(|failure| js_error(&env, failure))
    }

    /// The actions of `id` still in the window, oldest first, with their metadata: who filled
    /// the limit. At most `maxInInterval` of them. Takes `{ now }`.
    #[napi(
        catch_unwind,
        ts_args_type = "id: unknown, options?: unknown",
        ts_return_type = "Promise<LogEntry[]>"
    )]
    pub fn entries<'env>(
        &self,
        env: &'env Env,
        id: Unknown,
        options: Option<Unknown>,
    ) -> napi::Result<PromiseRaw<'env, Vec<LogEntry>>> {
        let (id, call) =
            match self::id(id).and_then(|id| Ok((Some(id), call_options(options, Takes::Now)?))) {
                Ok(parsed) => parsed,
                Err(failure) => return rejected(env, failure),
            };
        match &self.backend {
            Backend::Memory(store) => {
                let now = local_now(call.now);
                let store = store.borrow();
                let entries = store
                    .get(memory_id(id.as_deref()))
                    .map(|t| {
                        t.entries(&self.window, now)
                            .map(|e| LogEntry::new(e.at, e.meta.as_deref()))
                            .collect()
                    })
                    .unwrap_or_default();
                PromiseRaw::resolve(env, entries)
            }
            Backend::Redis(target) => {
                let (key, batchers) = match target
                    .key(id.as_deref())
                    .and_then(|key| Ok((key, self.redis_batchers()?)))
                {
                    Ok(found) => found,
                    Err(failure) => return rejected(env, failure),
                };
                let (answered, answer) = tokio::sync::oneshot::channel();
                batchers[ENTRIES].submit(
                    vec![key],
                    vec![target.now_argument(call.now), String::new()],
                    Box::new(move |answer| {
                        let _ = answered
                            .send(answer.and_then(|answer| entries_from_reply(answer.value)));
                    }),
                    None,
                );
                env.spawn_future_with_callback(
                    async move {
                        Ok(answer.await.unwrap_or_else(|_| {
                            Err(Failure::error(
                                ErrorCode::Internal,
                                "the entries call lost its answer",
                            ))
                        }))
                    },
                    |env, outcome| outcome.map_err(|failure| js_error(env, failure)),
                )
            }
        }
    }

    /// Sweeps the in-memory store when no call used it since the last time (ids gone idle are
    /// given back even when no call comes): `lib/engine.js` calls it every `periodMs`. Nothing
    /// on Redis.
    #[napi(catch_unwind)]
    pub fn sweep_if_quiet(&self, period_ms: f64) {
        let window = &self.window;
        self.backend
            .sweep_if_quiet(millis_to_micros(period_ms), |timeline, now| {
                timeline.is_idle(window, now)
            });
    }

    /// How many ids the in-memory store holds state for (always `0` on Redis). Idle ids are
    /// dropped as the map grows, so this stays near the number of ids active within `interval`.
    #[napi(getter, catch_unwind)]
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
    }

    /// How many active ids the in-memory store evicted to stay within `maxKeys` (each then
    /// started afresh). Always `0` without `maxKeys`.
    #[napi(getter, catch_unwind)]
    pub fn evicted_ids(&self) -> f64 {
        self.backend.memory_evictions() as f64
    }

    fn build(options: Unknown, store: Option<&JsRedisStore>) -> Outcome<Self> {
        let mut r = OptionsReader::new(
            Some(options),
            "rate limiter options",
            ErrorCode::InvalidOption,
            false,
        )?;
        let interval = r.required_number("interval")?;
        let max_in_interval = r.required_number("maxInInterval")?;
        let min_difference = r.number("minDifference")?.unwrap_or(0.0);
        let record_blocked = r.boolean("recordBlocked")?.unwrap_or(true);
        let backend = Backend::from_options(&mut r, store, "ratekeeper:")?;
        r.finish()?;
        let window = RollingWindow::new(interval, max_in_interval, min_difference, record_blocked)?;
        let batchers = match &backend {
            Backend::Redis(target) => Some(
                SCRIPT_MODES
                    .iter()
                    .map(|mode| batcher(&window, target, mode))
                    .collect(),
            ),
            Backend::Memory(_) => None,
        };
        Ok(Self {
            window,
            backend,
            batchers,
        })
    }

    fn dispatch(
        &self,
        env: &Env,
        mode: u32,
        id: Unknown,
        options: Option<Unknown>,
        ticket: Ticket,
        out: &mut Float64ArraySlice,
    ) -> Outcome<bool> {
        // The callback API's calls may leave the id out: the limiter's one global limit.
        let id = match mode & GLOBAL_WHEN_NO_ID {
            0 => Some(self::id(id)?),
            _ => optional_id(id)?,
        };
        let mode = Mode::from_code(mode & !GLOBAL_WHEN_NO_ID)?;
        let takes = match mode {
            Mode::Consume | Mode::Check => Takes::WeightAndMeta,
            Mode::Reward => Takes::Weight,
            _ => Takes::Now,
        };
        let call = call_options(options, takes)?;
        checked_weight(mode, &call)?;
        match &self.backend {
            Backend::Memory(store) => {
                let answer =
                    self.answer_in_memory(&mut store.borrow_mut(), id.as_deref(), call, mode);
                dispatch::write_answer(out, answer)?;
                Ok(true)
            }
            Backend::Redis(target) => {
                self.answer_on_redis(env, ticket, target, id.as_deref(), call, mode)?;
                Ok(false)
            }
        }
    }

    fn answer_in_memory(
        &self,
        store: &mut MemoryStore<Timeline>,
        id: Option<&str>,
        call: CallOptions,
        mode: Mode,
    ) -> Values {
        let now = local_now(call.now);
        let id = store.key(memory_id(id));
        let window = &self.window;
        match mode {
            Mode::Limit => values(
                &store
                    .entry(id, now, |timeline, now| timeline.is_idle(window, now))
                    .attempt(window, now),
            ),
            Mode::Peek => values(&store.get(id).map_or_else(
                || Timeline::default().peek(window, now),
                |t| t.peek(window, now),
            )),
            Mode::Clear => {
                store.remove(id);
                [0.0; VALUES]
            }
            Mode::Consume => {
                let meta = call.meta.map(Arc::from);
                if let Some(timeline) = store.get_mut(id) {
                    return verdict_values(&timeline.consume(window, now, call.weight, meta));
                }
                // A refused call leaves no state behind.
                let mut fresh = Timeline::default();
                let verdict = fresh.consume(window, now, call.weight, meta);
                if verdict.allowed {
                    *store.entry(id, now, |timeline, now| timeline.is_idle(window, now)) = fresh;
                }
                verdict_values(&verdict)
            }
            Mode::Check => {
                let facts = store.get(id).map_or_else(
                    || Timeline::default().log_facts(window, now, call.weight),
                    |t| t.log_facts(window, now, call.weight),
                );
                verdict_values(&window.judge(&facts, call.weight, now, false))
            }
            Mode::Reward => {
                if store.get_mut(id).is_some_and(|t| t.reward(call.weight)) {
                    store.remove(id);
                }
                let facts = store.get(id).map_or_else(
                    || Timeline::default().log_facts(window, now, 1),
                    |t| t.log_facts(window, now, 1),
                );
                verdict_values(&window.judge(&facts, 1, now, false))
            }
        }
    }

    fn redis_batchers(&self) -> Outcome<&[ScriptBatcher]> {
        self.batchers.as_deref().ok_or_else(|| {
            Failure::error(
                ErrorCode::Internal,
                "a Redis limiter without its script batchers",
            )
        })
    }

    /// Sends one call to Redis; its answer reaches JavaScript as `ticket` says.
    fn answer_on_redis(
        &self,
        env: &Env,
        ticket: Ticket,
        target: &RedisTarget,
        id: Option<&str>,
        call: CallOptions,
        mode: Mode,
    ) -> Outcome<()> {
        let key = target.key(id)?;
        let batchers = self.redis_batchers()?;
        // Nothing below fails: the call is pending from here on.
        let reply = dispatch::begin(env, ticket)?;
        let Some(index) = mode.batcher() else {
            let store = target.store.clone();
            dispatch::spawn(reply, async move {
                store.delete(&[key]).await.map(|()| [0.0; VALUES])
            });
            return Ok(());
        };
        let member = match mode {
            Mode::Peek | Mode::Check => String::new(),
            _ => unique_member(),
        };
        let sent_now = target.sent_now(call.now);
        let mut args = vec![now_text(sent_now), member];
        if matches!(mode, Mode::Consume | Mode::Check | Mode::Reward) {
            args.push(call.weight.to_string());
            // What follows each action's member: "|" and the metadata, "" for none (an empty
            // metadata is "|", kept as a value).
            args.push(
                call.meta
                    .map_or_else(String::new, |meta| format!("|{meta}")),
            );
        }
        let window = self.window.clone();
        // A reward answers as a check of weight 1 after the refund.
        let weight = if mode == Mode::Reward { 1 } else { call.weight };
        let lone = reply.lone();
        batchers[index].submit(
            vec![key],
            args,
            Box::new(move |answer| {
                reply.send(answer.and_then(|answer| {
                    let now = sent_now.or(answer.server_now);
                    answer_values(&window, mode, weight, now, answer.value)
                }))
            }),
            lone,
        );
        Ok(())
    }
}

/// Fails for a `consume` or `peek` (`check`) of more actions than one call may log (a reward of
/// any weight only deletes).
fn checked_weight(mode: Mode, call: &CallOptions) -> Outcome<()> {
    match mode {
        Mode::Consume | Mode::Check => check_logged_weight(call.weight),
        _ => Ok(()),
    }
}

/// The script's `{ member, score, ... }` of the actions in the window, as log entries. The
/// metadata is what follows the first `|` of a member.
fn entries_from_reply(answer: redis::Value) -> Outcome<Vec<LogEntry>> {
    let flat = Vec::<String>::from_redis_value(answer).map_err(|e| {
        Failure::error(
            ErrorCode::StoreError,
            format!("the entries script answered: {e}"),
        )
    })?;
    Ok(flat
        .chunks_exact(2)
        .map(|pair| {
            let at = pair[1].parse::<f64>().unwrap_or(0.0) as Micros;
            LogEntry::new(at, pair[0].split_once('|').map(|(_, meta)| meta))
        })
        .collect())
}

/// The script's answer for one call, as the numbers JavaScript decodes; `now` is the call's (its
/// own, or the server's as the script read it).
fn answer_values(
    window: &RollingWindow,
    mode: Mode,
    weight: u64,
    now: Option<Micros>,
    answer: redis::Value,
) -> Outcome<Values> {
    // The usual answers come as a count alone: a limit's { count, now, 0, now }, an allowed
    // consume's { now, in_window, 0, 0 }.
    let reply = match (mode, answer, now) {
        (Mode::Limit, redis::Value::Int(count), Some(now)) => vec![count, now, 0, now],
        (Mode::Consume, redis::Value::Int(in_window), Some(now)) => vec![now, in_window, 0, 0],
        (_, answer, _) => Vec::<i64>::from_redis_value(answer).map_err(|e| {
            Failure::error(
                ErrorCode::StoreError,
                format!("the rolling window script answered: {e}"),
            )
        })?,
    };
    match (mode, reply.as_slice()) {
        (Mode::Consume | Mode::Check | Mode::Reward, &[now, in_window, newest, anchor]) => {
            let in_window = usize::try_from(in_window).unwrap_or(0);
            let k = (in_window as u64 + weight).checked_sub(window.max_in_interval() as u64);
            let facts = LogFacts {
                in_window,
                newest: (in_window > 0).then_some(newest),
                anchor: k
                    .filter(|&k| k >= 1 && k <= in_window as u64)
                    .map(|_| anchor),
            };
            let charge = mode == Mode::Consume;
            Ok(verdict_values(&window.judge(&facts, weight, now, charge)))
        }
        (Mode::Consume | Mode::Check | Mode::Reward, _) => Err(Failure::error(
            ErrorCode::StoreError,
            "the sliding log script answered a wrong number of values",
        )),
        _ => Ok(values(&info_from_reply(window, &reply)?)),
    }
}

/// The batcher of one mode of the script, with this window's options as the shared arguments.
fn batcher(window: &RollingWindow, target: &RedisTarget, mode: &str) -> ScriptBatcher {
    let shared = vec![
        window.interval().to_string(),
        window.max_in_interval().to_string(),
        window.min_difference().to_string(),
        mode.to_owned(),
        if window.record_blocked() { "1" } else { "0" }.to_owned(),
    ];
    ScriptBatcher::new(
        dispatch::runtime().handle(),
        target.store.clone(),
        &SCRIPT,
        shared,
    )
}

/// Answers rolling-rate-limiter's way from the script's `{ count, current, previous, anchor }`,
/// followed, when refusals are not recorded, by `{ now, log_newest, log_anchor }`.
fn info_from_reply(window: &RollingWindow, reply: &[i64]) -> Outcome<WindowInfo> {
    let Some((&[count, current, previous, anchor], unrecorded)) = reply.split_first_chunk::<4>()
    else {
        return Err(Failure::error(
            ErrorCode::StoreError,
            format!("the rolling window script answered {} values", reply.len()),
        ));
    };
    let count = usize::try_from(count).unwrap_or(0);
    let previous = (count >= 2).then_some(previous);
    let info = window.info(&WindowFacts {
        count,
        current,
        previous,
        anchor,
    });
    if !info.blocked || window.record_blocked() {
        return Ok(info);
    }
    let &[now, log_newest, log_anchor] = unrecorded else {
        return Err(Failure::error(
            ErrorCode::StoreError,
            "the rolling window script did not answer the log's facts of an unrecorded refusal",
        ));
    };
    // The attempt was not recorded: answer for the log without it.
    let in_window = count.saturating_sub(1);
    let log = LogFacts {
        in_window,
        newest: (in_window > 0).then_some(log_newest),
        anchor: (count > window.max_in_interval()).then_some(log_anchor),
    };
    Ok(window.unrecorded(info, &log, now))
}
