//! `RollingWindow`: the rolling window (`src/rolling_window.rs`) on memory or Redis.
//!
//! `index.js` builds rolling-rate-limiter's API (`RateLimiter`, `RedisRateLimiter`, the callback
//! form) on this class.

use std::sync::LazyLock;

use napi::bindgen_prelude::{PromiseRaw, Unknown};
use napi::Env;
use napi_derive::napi;
use redis::Script;

use super::backend::{local_now, memory_id, Backend, RedisTarget};
use super::input::{call_options, id, CallOptions};
use super::options::OptionsReader;
use super::redis_store::JsRedisStore;
use super::{js_error, rejected};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::rolling_window::{RollingWindow, Timeline, WindowFacts, WindowInfo};
use crate::store::redis::unique_member;

static SCRIPT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rolling_window.lua")));

/// Options of a rolling window (those of rolling-rate-limiter 0.4, plus ours).
///
/// ```js
/// new RollingWindow({ interval: 60_000, maxInInterval: 10, minDifference: 1000 })
/// ```
#[napi(object)]
pub struct RollingWindowOptions {
    /// The window's length in milliseconds (> 0). Required.
    pub interval: f64,
    /// How many actions the window admits: a whole number from 1 to 1,000,000. Required.
    pub max_in_interval: f64,
    /// The least time between two consecutive actions, in milliseconds. Default `0` (none).
    pub min_difference: Option<f64>,
    /// Whether blocked attempts are recorded and count against later ones, as in
    /// rolling-rate-limiter. Default `true`; with `false`, a client that keeps calling too fast
    /// still gets its share of actions through.
    pub record_blocked: Option<bool>,
    /// Prefix of the Redis keys (the key of an id is `namespace + id`, as in
    /// rolling-rate-limiter). Default `'ratekeeper:'`. Ignored in memory.
    pub namespace: Option<String>,
    /// On Redis, whose clock decides when no `now` is given: `'redis'` (the server's, the
    /// default: no skew between application hosts) or `'local'` (this host's).
    pub clock: Option<String>,
}

/// Per-call options.
#[napi(object)]
pub struct CallOptionsObject {
    /// The instant of the call, in milliseconds since the epoch (fractions allowed), instead of
    /// the clock. Tests use it to control time without sleeping.
    pub now: Option<f64>,
}

/// rolling-rate-limiter's answer to `limitWithInfo` and `wouldLimitWithInfo`.
#[napi(object)]
pub struct RateLimitInfo {
    /// Whether the action is (or would be) refused.
    pub blocked: bool,
    /// Refused because `maxInInterval` actions already happened within `interval`.
    pub blocked_due_to_count: bool,
    /// Refused because the previous action was less than `minDifference` ago.
    pub blocked_due_to_min_difference: bool,
    /// Milliseconds until the next action would be allowed (rounded up). Following
    /// rolling-rate-limiter, this is at least `minDifference` even when not blocked.
    pub milliseconds_until_allowed: i64,
    /// How many more actions fit in the window now.
    pub actions_remaining: u32,
}

impl From<WindowInfo> for RateLimitInfo {
    fn from(info: WindowInfo) -> Self {
        Self {
            blocked: info.blocked,
            blocked_due_to_count: info.blocked_due_to_count,
            blocked_due_to_min_difference: info.blocked_due_to_min_difference,
            milliseconds_until_allowed: info.millis_until_allowed(),
            actions_remaining: info.actions_remaining,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Limit,
    Peek,
}

/// The sorted-set rolling window of rolling-rate-limiter, in memory or on Redis.
///
/// Most code uses it through `RateLimiter` / `RedisRateLimiter`; this is the class underneath.
///
/// ```js
/// const window = new RollingWindow({ interval: 1000, maxInInterval: 2 })
/// await window.limitWithInfo('user-1') // { blocked: false, actionsRemaining: 1, ... }
/// ```
#[napi(js_name = "RollingWindow")]
pub struct JsRollingWindow {
    window: RollingWindow,
    backend: Backend<Timeline>,
}

#[napi]
impl JsRollingWindow {
    /// Builds a rolling window in memory, or on `store` when one is given.
    /// Throws `ERR_INVALID_OPTION` or `ERR_UNKNOWN_OPTION` for bad options.
    #[napi(
        constructor,
        ts_args_type = "options: RollingWindowOptions, store?: RedisStore | null"
    )]
    pub fn new(env: Env, options: Unknown, store: Option<&JsRedisStore>) -> napi::Result<Self> {
        Self::build(options, store).map_err(|failure| js_error(&env, failure))
    }

    /// Attempts an action for `id` and records it (blocked attempts too, unless `recordBlocked`
    /// is `false`). Without an id, the one limit shared by all callers is used.
    ///
    /// ```js
    /// const { blocked, millisecondsUntilAllowed } = await window.limitWithInfo('user-1')
    /// ```
    #[napi(
        ts_args_type = "id?: string | number, options?: CallOptionsObject",
        ts_return_type = "Promise<RateLimitInfo>"
    )]
    pub fn limit_with_info<'env>(
        &self,
        env: &'env Env,
        id: Unknown,
        options: Option<Unknown>,
    ) -> napi::Result<PromiseRaw<'env, RateLimitInfo>> {
        self.answer(env, id, options, Mode::Limit)
    }

    /// What `limitWithInfo` would answer now, recording nothing.
    ///
    /// ```js
    /// if ((await window.wouldLimitWithInfo('user-1')).blocked) showCaptcha()
    /// ```
    #[napi(
        ts_args_type = "id?: string | number, options?: CallOptionsObject",
        ts_return_type = "Promise<RateLimitInfo>"
    )]
    pub fn would_limit_with_info<'env>(
        &self,
        env: &'env Env,
        id: Unknown,
        options: Option<Unknown>,
    ) -> napi::Result<PromiseRaw<'env, RateLimitInfo>> {
        self.answer(env, id, options, Mode::Peek)
    }

    /// Forgets every action of `id`.
    ///
    /// ```js
    /// await window.clear('user-1')
    /// ```
    #[napi(
        ts_args_type = "id?: string | number",
        ts_return_type = "Promise<void>"
    )]
    pub fn clear<'env>(&self, env: &'env Env, id: Unknown) -> napi::Result<PromiseRaw<'env, ()>> {
        let id = match self::id(Some(id)) {
            Ok(id) => id,
            Err(failure) => return rejected(env, failure),
        };
        match &self.backend {
            Backend::Memory(store) => {
                store.borrow_mut().remove(memory_id(id.as_deref()));
                PromiseRaw::resolve(env, ())
            }
            Backend::Redis(target) => {
                let key = match target.key(id.as_deref()) {
                    Ok(key) => key,
                    Err(failure) => return rejected(env, failure),
                };
                let store = target.store.clone();
                env.spawn_future_with_callback(
                    async move { Ok(store.delete(&key).await) },
                    |env, outcome| outcome.map_err(|failure| js_error(env, failure)),
                )
            }
        }
    }

    /// How many ids the in-memory store holds state for (always `0` on Redis). Idle ids are
    /// dropped as the map grows, so this stays near the number of ids active within `interval`.
    #[napi(getter)]
    pub fn tracked_ids(&self) -> u32 {
        self.backend.memory_size() as u32
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
        let backend = Backend::from_options(&mut r, store)?;
        r.finish()?;
        let window = RollingWindow::new(interval, max_in_interval, min_difference, record_blocked)?;
        Ok(Self { window, backend })
    }

    fn answer<'env>(
        &self,
        env: &'env Env,
        id: Unknown,
        options: Option<Unknown>,
        mode: Mode,
    ) -> napi::Result<PromiseRaw<'env, RateLimitInfo>> {
        let (id, call) = match self::id(Some(id)).and_then(|id| Ok((id, call_options(options)?))) {
            Ok(parsed) => parsed,
            Err(failure) => return rejected(env, failure),
        };
        match &self.backend {
            Backend::Memory(store) => {
                let info =
                    self.answer_in_memory(&mut store.borrow_mut(), id.as_deref(), call, mode);
                PromiseRaw::resolve(env, info.into())
            }
            Backend::Redis(target) => match self.answer_on_redis(target, id.as_deref(), call, mode)
            {
                Ok(promise) => {
                    let window = self.window.clone();
                    env.spawn_future_with_callback(promise, move |env, reply| {
                        reply
                            .and_then(|reply| facts_from_reply(&reply))
                            .map(|facts| window.info(&facts).into())
                            .map_err(|failure| js_error(env, failure))
                    })
                }
                Err(failure) => rejected(env, failure),
            },
        }
    }

    fn answer_in_memory(
        &self,
        store: &mut crate::store::memory::MemoryStore<Timeline>,
        id: Option<&str>,
        call: CallOptions,
        mode: Mode,
    ) -> WindowInfo {
        let now = local_now(call.now);
        let id = memory_id(id);
        let window = &self.window;
        match mode {
            Mode::Limit => store
                .entry(id, now, |timeline, now| timeline.is_idle(window, now))
                .attempt(window, now),
            Mode::Peek => store.get(id).map_or_else(
                || Timeline::default().peek(window, now),
                |t| t.peek(window, now),
            ),
        }
    }

    /// The script call for one answer, as a future that yields the script's reply.
    fn answer_on_redis(
        &self,
        target: &RedisTarget,
        id: Option<&str>,
        call: CallOptions,
        mode: Mode,
    ) -> Outcome<impl std::future::Future<Output = napi::Result<Outcome<Vec<i64>>>> + Send + 'static>
    {
        let key = target.key(id)?;
        let now = target.now_argument(call.now);
        let w = &self.window;
        let (interval, max, min_difference) =
            (w.interval(), w.max_in_interval(), w.min_difference());
        let record_blocked = if w.record_blocked() { "1" } else { "0" };
        let mode = if mode == Mode::Limit { "limit" } else { "peek" };
        let store = target.store.clone();
        Ok(async move {
            let mut invocation = SCRIPT.prepare_invoke();
            invocation
                .key(key)
                .arg(now)
                .arg(interval)
                .arg(max)
                .arg(min_difference)
                .arg(mode)
                .arg(record_blocked)
                .arg(unique_member());
            Ok(store.eval::<Vec<i64>>(&invocation).await)
        })
    }
}

/// Reads the script's `{ count, current, previous, anchor }`.
fn facts_from_reply(reply: &[i64]) -> Outcome<WindowFacts> {
    let &[count, current, previous, anchor] = reply else {
        return Err(Failure::error(
            ErrorCode::StoreError,
            format!(
                "the rolling window script answered {} values instead of 4",
                reply.len()
            ),
        ));
    };
    let count = usize::try_from(count).unwrap_or(0);
    Ok(WindowFacts {
        count,
        current,
        previous: (count >= 2).then_some(previous),
        anchor,
    })
}
