//! The in-memory fast path: one plain JavaScript function per engine for the common call, one
//! string id with `{ now, weight }` at most (redback's engine takes its count's `interval` where
//! the others take `weight`).
//!
//! A napi-rs class method pays for finding its Rust object (`napi_unwrap` and a type-tag check)
//! and for converting each argument: about 300 ns per call on a 2-core VM, more than the whole
//! decision. The function made here is a bare N-API callback whose data points at the engine:
//! it reads the id into a stack buffer (no allocation), the mode and numbers as they are, and
//! writes the five answer numbers into the caller's `Float64Array`, registered once. Measured on
//! the same machine: about 60 ns of call overhead instead of 300.
//!
//! It answers only calls it can answer exactly as the engine's `run` would, and declines every
//! other (returns `false` before touching any state): then `lib/engine.js` takes the general
//! path, which checks everything and throws the right error.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use napi::bindgen_prelude::{This, Unknown};
use napi::{sys, Env, JsValue};

use super::dispatch::{Values, VALUES};
use super::input::MAX_ID_BYTES;
use super::js_error;
use crate::error::{ErrorCode, Failure, Outcome};

/// Declares the `fastPath(out)` method of a napi class whose engine (`$class.$field`, or the
/// class itself) is [`FastRun`].
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
        }
    };
}

/// An engine that can answer one string id in memory without the general path.
pub trait FastRun: 'static {
    /// Whether its state is in this process's memory (only then is there a fast path).
    fn in_memory(&self) -> bool;

    /// Answers `mode` for `id` (a non-empty, well-formed string of at most [`MAX_ID_BYTES`]
    /// bytes) with `weight` (the engine's number: redback's takes its interval) and `now`
    /// (`NaN`: not given). `Ok(None)`: not answerable here, with
    /// nothing changed (the engine is on Redis, or an argument needs the general path's checks).
    /// `Err`: the call failed after its arguments were accepted, as `run` would fail.
    fn run_fast(&self, mode: u32, id: &str, weight: f64, now: f64) -> Outcome<Option<Values>>;
}

/// What the function's callback needs: the engine, its JavaScript object (held so that the
/// engine outlives the function) and the answer array (held likewise).
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
    fast_function(env, this.raw(), engine, out).map(Some)
}

/// The fast function of `engine`, the Rust object of the JavaScript object `this`:
/// `(mode, id, weight, now) => boolean`, answering into `out` (a `Float64Array` of at least
/// five numbers). See the module's documentation.
fn fast_function<'env, T: FastRun>(
    env: &'env Env,
    this: sys::napi_value,
    engine: &T,
    out: Unknown<'env>,
) -> napi::Result<Unknown<'env>> {
    let raw_env = env.raw();
    unsafe {
        let mut is_typed_array = false;
        check(sys::napi_is_typedarray(
            raw_env,
            out.raw(),
            &mut is_typed_array,
        ))?;
        let mut kind = 0;
        let mut length = 0usize;
        let mut data = ptr::null_mut();
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
        if !is_typed_array || kind != sys::TypedarrayType::float64_array || length < VALUES {
            return Err(js_error(
                env,
                Failure::type_error(
                    ErrorCode::InvalidArgument,
                    format!("`out` must be a Float64Array of at least {VALUES} numbers"),
                ),
            ));
        }
        let mut engine_ref = ptr::null_mut();
        check(sys::napi_create_reference(
            raw_env,
            this,
            1,
            &mut engine_ref,
        ))?;
        let mut out_ref = ptr::null_mut();
        check(sys::napi_create_reference(
            raw_env,
            out.raw(),
            1,
            &mut out_ref,
        ))?;
        let fast = Box::into_raw(Box::new(Fast {
            engine: engine as *const T,
            engine_ref,
            out: data.cast(),
            out_ref,
        }));
        let mut function = ptr::null_mut();
        let created = sys::napi_create_function(
            raw_env,
            c"fastRun".as_ptr(),
            7,
            Some(call::<T>),
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
    sys::napi_delete_reference(env, fast.out_ref);
}

/// Room for the longest id (in UTF-16 code units: at most one per byte of UTF-8) and a unit
/// more, so that a longer one shows as such, and for the terminating NUL that N-API writes.
const BUFFER: usize = MAX_ID_BYTES + 2;

/// The callback: `(mode, id, weight, now)`, returning whether the answer is in `out`.
unsafe extern "C" fn call<T: FastRun>(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    let mut argc = 4usize;
    let mut argv = [ptr::null_mut(); 4];
    let mut data = ptr::null_mut();
    let mut answered = false;
    if sys::napi_get_cb_info(
        env,
        info,
        &mut argc,
        argv.as_mut_ptr(),
        ptr::null_mut(),
        &mut data,
    ) == sys::Status::napi_ok
        && argc == 4
    {
        let fast = &*data.cast::<Fast<T>>();
        match answer(env, fast, &argv) {
            Ok(done) => answered = done,
            Err(failure) => {
                let env = Env::from_raw(env);
                let error = js_error(&env, failure);
                napi::JsError::from(error).throw_into(env.raw());
                return ptr::null_mut();
            }
        }
    }
    let mut result = ptr::null_mut();
    sys::napi_get_boolean(env, answered, &mut result);
    result
}

/// Reads the arguments and runs the engine: `Ok(false)` to decline.
unsafe fn answer<T: FastRun>(
    env: sys::napi_env,
    fast: &Fast<T>,
    argv: &[sys::napi_value; 4],
) -> Outcome<bool> {
    let mut mode = 0u32;
    let mut weight = 0f64;
    let mut now = 0f64;
    if sys::napi_get_value_uint32(env, argv[0], &mut mode) != sys::Status::napi_ok
        || sys::napi_get_value_double(env, argv[2], &mut weight) != sys::Status::napi_ok
        || sys::napi_get_value_double(env, argv[3], &mut now) != sys::Status::napi_ok
    {
        return Ok(false);
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
        return Ok(false);
    }
    // Longer than an id may be (in UTF-8, each unit takes a byte at least): the general path's.
    if length == 0 || length > MAX_ID_BYTES {
        return Ok(false);
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
                return Ok(false);
            };
            let width = character.len_utf8();
            if used + width > MAX_ID_BYTES {
                return Ok(false);
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
    let outcome = catch_unwind(AssertUnwindSafe(|| engine.run_fast(mode, id, weight, now)))
        .unwrap_or_else(|_| {
            Err(Failure::error(
                ErrorCode::Internal,
                "the limiter failed unexpectedly; please report this bug",
            ))
        });
    let Some(values) = outcome? else {
        return Ok(false);
    };
    ptr::copy_nonoverlapping(values.as_ptr(), fast.out, VALUES);
    Ok(true)
}
