//! The fast path: one plain JavaScript function per engine for the common call, one string id
//! with `{ now, weight }` at most (redback's engine takes its count's `interval` where the others
//! take `weight`).
//!
//! A napi-rs class method pays for finding its Rust object (`napi_unwrap` and a type-tag check)
//! and for converting each argument: about 300 ns per call on a 2-core VM, more than the whole
//! decision. The function made here is a bare N-API callback whose data points at the engine:
//! it reads the id into a stack buffer (no allocation), the mode and numbers as they are, and
//! writes the five answer numbers into the caller's `Float64Array`, registered once. Measured on
//! the same machine: about 60 ns of call overhead instead of 300.
//!
//! In memory (`fastPath`) it answers the call at once. On Redis (`sendPath`) it sends the call
//! as `run` would, under the ticket it is given, without the class method and without an options
//! object to read (the call's options are read in JavaScript, where reading a property costs far
//! less than through N-API: `run` with an options object of two numbers took 2.3 µs in memory, 0.9
//! without one, where the fast path took 0.15; benchmark/RESULTS.md, item 35).
//!
//! It takes only calls it can take exactly as the engine's `run` would, and declines every
//! other (returns `false` before touching any state or sending anything): then `lib/engine.js`
//! takes the general path, which checks everything and throws the right error.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::bindgen_prelude::{This, Unknown};
use napi::{sys, Env, JsValue};

use super::dispatch::{Ticket, Values, VALUES};
use super::input::MAX_ID_BYTES;
use super::js_error;
use crate::error::{ErrorCode, Failure, Outcome};

/// Declares the `fastPath(out)` and `sendPath()` methods of a napi class whose engine
/// (`$class.$field`, or the class itself) is [`FastRun`].
#[macro_export]
macro_rules! fast_path_method {
    ($class:ident $(. $field:ident)?) => {
        #[napi_derive::napi]
        impl $class {
            /// The in-memory fast path: a function `(mode, id, weight, now) => boolean` that
            /// answers a call with one string id into `out` (see `src/binding/fast.rs`), or `null`
            /// on Redis. Use the JavaScript class rather than this.
            #[napi(
                catch_unwind,
                ts_args_type = "out: Float64Array",
                ts_return_type = "((mode: number, id: string, weight: number, now: number) => boolean) | null"
            )]
            pub fn fast_path<'env>(
                &self,
                env: &'env napi::Env,
                this: napi::bindgen_prelude::This,
                out: napi::bindgen_prelude::Unknown<'env>,
            ) -> napi::Result<Option<napi::bindgen_prelude::Unknown<'env>>> {
                $crate::binding::fast::fast_path(env, this, &(*self)$(.$field)?, out)
            }

            /// The fast path on Redis: a function `(mode, id, weight, now, ticket) => boolean` that
            /// sends a call with one string id, whose answer comes under `ticket` as `run`'s does
            /// (see `src/binding/fast.rs`), or `null` in memory (and for an engine whose calls all
            /// go by `run`). Use the JavaScript class rather than this.
            #[napi(
                catch_unwind,
                ts_return_type = "((mode: number, id: string, weight: number, now: number, ticket: number) => boolean) | null"
            )]
            pub fn send_path<'env>(
                &self,
                env: &'env napi::Env,
                this: napi::bindgen_prelude::This,
            ) -> napi::Result<Option<napi::bindgen_prelude::Unknown<'env>>> {
                $crate::binding::fast::send_path(env, this, &(*self)$(.$field)?)
            }
        }
    };
}

/// What a call on the fast path did.
pub enum FastRan {
    /// Not a call the fast path takes: nothing was changed or sent.
    Declined,
    /// Answered in memory.
    Answered(Values),
    /// Sent to Redis: the answer comes under the call's ticket.
    Sent,
}

/// An engine that can take a call for one string id without the general path.
pub trait FastRun: 'static {
    /// Whether its state is in this process's memory (then `fastPath`, else `sendPath`).
    fn in_memory(&self) -> bool;

    /// Whether it sends calls on the fast path when on Redis (else it has no `sendPath`).
    fn sends_fast(&self) -> bool {
        true
    }

    /// Runs `mode` for `id` (a non-empty, well-formed string of at most [`MAX_ID_BYTES`] bytes)
    /// with `weight` (the engine's number: redback's takes its interval) and `now` (`NaN`: not
    /// given): in memory answers it; on Redis sends it under `ticket` (given only there).
    /// [`FastRan::Declined`], with nothing changed or sent, when an argument needs the general
    /// path's checks. `Err`: the call failed after its arguments were accepted, as `run` would
    /// fail.
    fn run_fast(
        &self,
        env: &Env,
        mode: u32,
        id: &str,
        weight: f64,
        now: f64,
        ticket: Option<Ticket>,
    ) -> Outcome<FastRan>;
}

/// What the function's callback needs: the engine, its JavaScript object (held so that the
/// engine outlives the function) and the answer array (held likewise; none, null, for `sendPath`).
struct Fast<T> {
    engine: *const T,
    engine_ref: sys::napi_ref,
    out: *mut f64,
    out_ref: sys::napi_ref,
}

/// `fastPath(out)` of a napi class: the fast function of `engine` (held by `this`), or `None`
/// when it is not in memory.
pub fn fast_path<'env, T: FastRun>(
    env: &'env Env,
    this: This,
    engine: &T,
    out: Unknown<'env>,
) -> napi::Result<Option<Unknown<'env>>> {
    if !engine.in_memory() {
        return Ok(None);
    }
    let out = answer_array(env, out)?;
    // SAFETY: `out` is a Float64Array of at least VALUES numbers, held by the function.
    unsafe { fast_function(env, this.raw(), engine, Some(out), Some(answer_call::<T>)) }.map(Some)
}

/// `sendPath()` of a napi class: the sending function of `engine` (held by `this`), or `None`
/// when it is in memory.
pub fn send_path<'env, T: FastRun>(
    env: &'env Env,
    this: This,
    engine: &T,
) -> napi::Result<Option<Unknown<'env>>> {
    if engine.in_memory() || !engine.sends_fast() {
        return Ok(None);
    }
    // SAFETY: a function that writes no answer needs no array.
    unsafe { fast_function(env, this.raw(), engine, None, Some(send_call::<T>)) }.map(Some)
}

/// `out`'s numbers, checked: a Float64Array of at least [`VALUES`].
fn answer_array<'env>(env: &Env, out: Unknown<'env>) -> napi::Result<(Unknown<'env>, *mut f64)> {
    let raw_env = env.raw();
    let mut is_typed_array = false;
    let mut kind = 0;
    let mut length = 0usize;
    let mut data = ptr::null_mut();
    // SAFETY: plain N-API calls on the current call's env and value.
    unsafe {
        check(sys::napi_is_typedarray(
            raw_env,
            out.raw(),
            &mut is_typed_array,
        ))?;
        if is_typed_array {
            check(sys::napi_get_typedarray_info(
                raw_env,
                out.raw(),
                &mut kind,
                &mut length,
                &mut data,
                ptr::null_mut(),
                ptr::null_mut(),
            ))?;
        }
    }
    if !is_typed_array || kind != sys::TypedarrayType::float64_array || length < VALUES {
        return Err(js_error(
            env,
            Failure::type_error(
                ErrorCode::InvalidArgument,
                format!("`out` must be a Float64Array of at least {VALUES} numbers"),
            ),
        ));
    }
    Ok((out, data.cast()))
}

/// A function whose callback is `callback` and whose data points
/// at `engine`, the Rust object of the JavaScript object `this`, and at `out` when given (a
/// `Float64Array` of at least [`VALUES`] numbers, and its data): see the module's documentation.
unsafe fn fast_function<'env, T: FastRun>(
    env: &'env Env,
    this: sys::napi_value,
    engine: &T,
    out: Option<(Unknown<'env>, *mut f64)>,
    callback: sys::napi_callback,
) -> napi::Result<Unknown<'env>> {
    let raw_env = env.raw();
    let mut engine_ref = ptr::null_mut();
    check(sys::napi_create_reference(
        raw_env,
        this,
        1,
        &mut engine_ref,
    ))?;
    let mut out_ref = ptr::null_mut();
    let mut out_data = ptr::null_mut();
    if let Some((out, data)) = out {
        check(sys::napi_create_reference(
            raw_env,
            out.raw(),
            1,
            &mut out_ref,
        ))?;
        out_data = data;
    }
    let fast = Box::into_raw(Box::new(Fast {
        engine: engine as *const T,
        engine_ref,
        out: out_data,
        out_ref,
    }));
    let mut function = ptr::null_mut();
    let created = sys::napi_create_function(
        raw_env,
        c"fastRun".as_ptr(),
        7,
        callback,
        fast.cast(),
        &mut function,
    );
    let finalized = if created == sys::Status::napi_ok {
        sys::napi_add_finalizer(
            raw_env,
            function,
            fast.cast(),
            Some(finalize::<T>),
            ptr::null_mut(),
            ptr::null_mut(),
        )
    } else {
        created
    };
    if finalized != sys::Status::napi_ok {
        finalize::<T>(raw_env, fast.cast(), ptr::null_mut());
        return Err(napi::Error::from_reason("could not create the fast path"));
    }
    Ok(Unknown::from_raw_unchecked(raw_env, function))
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason("could not create the fast path"))
    }
}

unsafe extern "C" fn finalize<T>(env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let fast = Box::from_raw(data.cast::<Fast<T>>());
    sys::napi_delete_reference(env, fast.engine_ref);
    if !fast.out_ref.is_null() {
        sys::napi_delete_reference(env, fast.out_ref);
    }
}

/// Room for the longest id (in UTF-16 code units: at most one per byte of UTF-8) and a unit
/// more, so that a longer one shows as such, and for the terminating NUL that N-API writes.
const BUFFER: usize = MAX_ID_BYTES + 2;

/// The callback of `fastPath`: `(mode, id, weight, now)`, returning whether the answer is in
/// `out`.
unsafe extern "C" fn answer_call<T: FastRun>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    callback::<T, 4>(env, info, |fast, env, argv| {
        let FastRan::Answered(values) = run(env, fast, argv, None)? else {
            return Ok(false);
        };
        ptr::copy_nonoverlapping(values.as_ptr(), fast.out, VALUES);
        Ok(true)
    })
}

/// The callback of `sendPath`: `(mode, id, weight, now, ticket)`, returning whether the call was
/// sent (its answer comes under `ticket`).
unsafe extern "C" fn send_call<T: FastRun>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    callback::<T, 5>(env, info, |fast, env, argv| {
        let mut ticket = 0f64;
        if sys::napi_get_value_double(env, argv[4], &mut ticket) != sys::Status::napi_ok {
            return Ok(false);
        }
        let ticket = Ticket::from_number(ticket)?;
        Ok(matches!(run(env, fast, argv, Some(ticket))?, FastRan::Sent))
    })
}

/// A callback taking `N` arguments: `take` says whether it took the call; its failure is thrown.
unsafe fn callback<T: FastRun, const N: usize>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
    take: impl FnOnce(&Fast<T>, sys::napi_env, &[sys::napi_value; N]) -> Outcome<bool>,
) -> sys::napi_value {
    let mut argc = N;
    let mut argv = [ptr::null_mut(); N];
    let mut data = ptr::null_mut();
    let mut taken = false;
    if sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr(),
        ptr::null_mut(),
        &mut data,
    ) == sys::Status::napi_ok
        && argc == N
    {
        let fast = &*data.cast::<Fast<T>>();
        match take(fast, env, &argv) {
            Ok(done) => taken = done,
            Err(failure) => {
                let env = Env::from_raw(env);
                let error = js_error(&env, failure);
                napi::JsError::from(error).throw_into(env.raw());
                return ptr::null_mut();
            }
        }
    }
    let mut result = ptr::null_mut();
    sys::napi_get_boolean(env, taken, &mut result);
    result
}

/// Reads the call's first four arguments (`mode, id, weight, now`) and runs the engine.
unsafe fn run<T: FastRun>(
    env: sys::napi_env,
    fast: &Fast<T>,
    argv: &[sys::napi_value],
    ticket: Option<Ticket>,
) -> Outcome<FastRan> {
    let mut mode = 0u32;
    let mut weight = 0f64;
    let mut now = 0f64;
    if sys::napi_get_value_uint32(env, argv[0], &mut mode) != sys::Status::napi_ok
        || sys::napi_get_value_double(env, argv[2], &mut weight) != sys::Status::napi_ok
        || sys::napi_get_value_double(env, argv[3], &mut now) != sys::Status::napi_ok
    {
        return Ok(FastRan::Declined);
    }
    // Not zeroed: N-API writes the code units read below.
    let mut units = MaybeUninit::<[u16; BUFFER]>::uninit();
    let mut length = 0usize;
    // UTF-16, as V8 holds strings: for the usual (one-byte) string, a plain widening copy, where
    // napi_get_value_string_utf8 encodes character by character (13% of a call, measured).
    if sys::napi_get_value_string_utf16(
        env,
        argv[1],
        units.as_mut_ptr().cast(),
        BUFFER,
        &mut length,
    ) != sys::Status::napi_ok
    {
        return Ok(FastRan::Declined);
    }
    // Longer than an id may be (in UTF-8, each unit takes a byte at least): the general path's.
    if length == 0 || length > MAX_ID_BYTES {
        return Ok(FastRan::Declined);
    }
    let units = std::slice::from_raw_parts(units.as_ptr().cast::<u16>(), length);
    let mut bytes = MaybeUninit::<[u8; MAX_ID_BYTES]>::uninit();
    let bytes = bytes.as_mut_ptr().cast::<u8>();
    // Two plain loops, simple enough for the compiler to vectorize: whether the id is ASCII, and
    // its units narrowed to bytes.
    let ascii = units.iter().fold(0, |seen, &unit| seen | unit) < 0x80;
    for (i, &unit) in units.iter().enumerate() {
        *bytes.add(i) = unit as u8;
    }
    let mut used = length;
    if !ascii {
        // Encoded into the same buffer; a lone surrogate is not an id the fast path can name (the
        // general path tells it apart).
        used = 0;
        for unit in char::decode_utf16(units.iter().copied()) {
            let Ok(character) = unit else {
                return Ok(FastRan::Declined);
            };
            let width = character.len_utf8();
            if used + width > MAX_ID_BYTES {
                return Ok(FastRan::Declined);
            }
            let mut encoded = [0u8; 4];
            character.encode_utf8(&mut encoded);
            ptr::copy_nonoverlapping(encoded.as_ptr(), bytes.add(used), width);
            used += width;
        }
    }
    // UTF-8: ASCII as it is, or encoded from whole characters.
    let id = std::str::from_utf8_unchecked(std::slice::from_raw_parts(bytes, used));
    let engine = &*fast.engine;
    let env = Env::from_raw(env);
    catch_unwind(AssertUnwindSafe(|| {
        engine.run_fast(&env, mode, id, weight, now, ticket)
    }))
    .unwrap_or_else(|_| {
        Err(Failure::error(
            ErrorCode::Internal,
            "the limiter failed unexpectedly; please report this bug",
        ))
    })
}
