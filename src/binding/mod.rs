//! The JavaScript binding: thin classes over the algorithms and stores.
//!
//! This is the only place that touches napi: it reads JS values into checked Rust values
//! ([`options`], [`input`]), calls the pure algorithm on the chosen store, and turns answers and
//! [`Failure`]s back into JS values. Every method returns a Promise; input errors reject it
//! rather than throw, as an `async` function would.

/// A script of `lua/`, with `lua/prelude.lua` (the helpers every script uses) in front: this is
/// what runs in Redis. `lua_script!("fixed_window")` is `lua/fixed_window.lua`. A script may
/// begin with a lone call's path that needs none of the helpers: the prelude then goes where the
/// script has the line [`PRELUDE_HERE`], so that a call answered above it never pays for the
/// prelude's definitions (each function a script defines costs Redis CPU at every call), and
/// `lua/lone.lua` (the lone paths' few helpers) where it has the line [`LONE_HERE`]. It runs as a
/// Redis Function where it can (see [`crate::store::script`]).
macro_rules! lua_script {
    ($name:literal) => {
        std::sync::LazyLock::new(|| {
            $crate::store::script::LuaScript::new(
                $name,
                &$crate::binding::with_prelude(include_str!(concat!("../../lua/", $name, ".lua"))),
            )
        })
    };
}

/// The line of a script of `lua/` where `lua/prelude.lua` goes, when not in front (see
/// [`lua_script!`]).
pub const PRELUDE_HERE: &str = "-- (lua/prelude.lua goes here)\n";

/// The line of a script of `lua/` where `lua/lone.lua` goes, if anywhere (see [`lua_script!`]).
pub const LONE_HERE: &str = "-- (lua/lone.lua goes here)\n";

/// `script` with `lua/lone.lua` in place of its line [`LONE_HERE`] if it has one, and
/// `lua/prelude.lua` in place of its line [`PRELUDE_HERE`], or in front.
pub fn with_prelude(script: &str) -> String {
    const PRELUDE: &str = include_str!("../../lua/prelude.lua");
    const LONE: &str = include_str!("../../lua/lone.lua");
    let script = script.replacen(LONE_HERE, LONE, 1);
    match script.split_once(PRELUDE_HERE) {
        Some((head, rest)) => format!("{head}{PRELUDE}{rest}"),
        None => format!("{PRELUDE}{script}"),
    }
}

pub mod backend;
pub mod bucket_circle;
#[macro_use]
pub mod counting;
pub mod direct_lane;
pub mod dispatch;
pub mod expiring_counter;
pub mod fast;
pub mod fixed_window;
pub mod gcra;
pub mod input;
pub mod leaky_bucket;
pub mod options;
pub mod redis_store;
pub mod rolling_window;
pub mod sliding_tail;
pub mod sliding_window;
pub mod token_bucket;

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{Env, JsError, JsRangeError, JsTypeError, JsValue, Status};

use crate::error::{ErrorClass, Failure};

/// Builds the JS error for a failure: the right class, `code`, and `cause` when there is one.
/// The returned `napi::Error` holds that very object, so throwing or rejecting with it hands it
/// to JavaScript as is.
pub fn js_error(env: &Env, failure: Failure) -> napi::Error {
    // The caller's own code threw (a getter, a Proxy trap): that exception, as it is.
    if let Some(exception) = take_exception(env) {
        return napi::Error::from(exception);
    }
    let Failure {
        class,
        code,
        message,
        cause,
    } = failure;
    let mut error = napi::Error::new(code.as_str(), message);
    if let Some(cause) = cause {
        error.cause = Some(Box::new(napi::Error::new(
            Status::GenericFailure,
            cause.message,
        )));
        // `cause.code` names the kind of the underlying failure; it goes on the cause object.
        return with_cause_code(env, class, error, &cause.code);
    }
    napi::Error::from(new_error_value(env, class, error))
}

/// The exception pending on `env`, if any, cleared so that the call can return or reject with it.
fn take_exception(env: &Env) -> Option<napi::bindgen_prelude::Unknown<'_>> {
    use napi::bindgen_prelude::FromNapiValue;
    let mut pending = false;
    // SAFETY: plain N-API calls on the current call's env.
    unsafe {
        if napi::sys::napi_is_exception_pending(env.raw(), &mut pending)
            != napi::sys::Status::napi_ok
            || !pending
        {
            return None;
        }
        let mut exception = std::ptr::null_mut();
        napi::sys::napi_get_and_clear_last_exception(env.raw(), &mut exception);
        napi::bindgen_prelude::Unknown::from_napi_value(env.raw(), exception).ok()
    }
}

fn new_error_value<'env>(
    env: &'env Env,
    class: ErrorClass,
    error: napi::Error<&'static str>,
) -> napi::bindgen_prelude::Unknown<'env> {
    match class {
        ErrorClass::Error => JsError::from(error).into_unknown(*env),
        ErrorClass::TypeError => JsTypeError::from(error).into_unknown(*env),
        ErrorClass::RangeError => JsRangeError::from(error).into_unknown(*env),
    }
}

fn with_cause_code(
    env: &Env,
    class: ErrorClass,
    error: napi::Error<&'static str>,
    cause_code: &str,
) -> napi::Error {
    use napi::bindgen_prelude::JsObjectValue;
    let value = new_error_value(env, class, error);
    if let Ok(object) = value.coerce_to_object() {
        if let Ok(mut cause) = object.get_named_property::<napi::bindgen_prelude::Object>("cause") {
            let _ = cause.set_named_property("code", cause_code);
        }
    }
    napi::Error::from(value)
}

/// Registers the function that receives the answers of Redis-backed calls in batches:
/// `handler(answers, failures)`, and returns the id of this answer channel, which calls then
/// name. `lib/engine.js` calls this once; nothing else should.
#[napi_derive::napi(
    catch_unwind,
    ts_args_type = "handler: (answers: Float64Array, failures: Array<[number, Error]>) => void"
)]
pub fn set_answer_handler(
    env: Env,
    handler: napi::bindgen_prelude::Function<
        napi::bindgen_prelude::Unknown,
        napi::bindgen_prelude::Unknown,
    >,
) -> napi::Result<u32> {
    dispatch::set_handler(&env, handler)
}

/// Sends the Redis calls made since the last time (src/store/batch.rs): `lib/engine.js` runs this
/// once per turn of the event loop in which a call was made; nothing else should. When the only
/// call held is a lone call of the answer channel `channel`, it is offered to the direct lane
/// instead, and its ticket is returned (`lib/direct.js` then takes it); -1 otherwise.
#[napi_derive::napi(catch_unwind)]
pub fn send_held_calls(channel: Option<u32>) -> f64 {
    crate::store::batch::send_held_calls(channel).unwrap_or(-1.0)
}

/// Sends the lone call held, by its direct lane, before its turn of the event loop ends:
/// `lib/engine.js` runs this once the microtasks queued before a lone call have run; nothing
/// else should. When it is the only call held, of the answer channel `channel`, and its lane is
/// open, it is offered to the lane and its ticket is returned (`lib/direct.js` then takes it);
/// otherwise nothing is sent, -1 is returned, and the calls held wait for `sendHeldCalls`.
#[napi_derive::napi(catch_unwind)]
pub fn send_lone_call(channel: u32) -> f64 {
    crate::store::batch::send_lone_call(channel).unwrap_or(-1.0)
}

/// A promise already rejected with `failure`.
pub fn rejected<'env, T: ToNapiValue>(
    env: &'env Env,
    failure: Failure,
) -> napi::Result<PromiseRaw<'env, T>> {
    let error = js_error(env, failure);
    PromiseRaw::reject(env, error)
}
