//! Getting answers from Redis back to JavaScript, cheaply.
//!
//! napi-rs settles each async call through a threadsafe function of its own, created and torn
//! down per call, and builds each answer object property by property through napi: several
//! microseconds per call, more than the Redis round trip costs the CPU. Here, Redis work runs on
//! one small tokio runtime of ours; finished answers are queued as numbers (a token and four
//! values) and delivered to JavaScript in batches, through one long-lived threadsafe function per
//! JS environment, to a handler that `lib/engine.js` registers. JavaScript owns the Promises and
//! turns the numbers into answer objects.
//!
//! The threadsafe function keeps Node's event loop alive only while calls are pending, so an idle
//! limiter never keeps a process running.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::{Arc, LazyLock, Mutex};

use futures_util::FutureExt;
use napi::bindgen_prelude::{Float64Array, Function, ToNapiValue, Unknown};
use napi::{sys, Env, JsValue};

use super::js_error;
use crate::error::{ErrorCode, Failure, Outcome};

/// Numbers per answer: what an algorithm reports (its flags, waits, counts).
pub const VALUES: usize = 4;

/// The answer of one call, as numbers (`lib/engine.js` decodes them per algorithm).
pub type Values = [f64; VALUES];

/// The runtime that runs every Redis call: one worker thread is plenty for I/O and leaves the
/// other cores to Node and Redis.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ratekeeper-io")
            .enable_all()
            .build()
            .expect("the tokio runtime could not start")
    });
    &RUNTIME
}

/// Answers waiting for the JS thread.
#[derive(Default)]
struct Queue {
    /// `token, values...` per answer.
    answers: Vec<f64>,
    failures: Vec<(u32, Failure)>,
    /// The threadsafe function, until Node finalizes it.
    tsfn: Option<usize>,
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.answers.is_empty() && self.failures.is_empty()
    }
}

/// The side of the queue that tokio tasks see.
struct Shared {
    queue: Mutex<Queue>,
}

impl Shared {
    fn push(&self, add: impl FnOnce(&mut Queue)) {
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let was_empty = queue.is_empty();
        add(&mut queue);
        // One wake-up per batch: while the queue is non-empty, a drain is already scheduled.
        if let (true, Some(tsfn)) = (was_empty, queue.tsfn) {
            // The lock is held during the call, so Node cannot finalize the function meanwhile.
            unsafe {
                sys::napi_call_threadsafe_function(
                    tsfn as sys::napi_threadsafe_function,
                    ptr::null_mut(),
                    sys::ThreadsafeFunctionCallMode::nonblocking,
                )
            };
        }
    }
}

/// The JS thread's side: the threadsafe function and how many calls are pending.
struct Dispatcher {
    shared: Arc<Shared>,
    tsfn: sys::napi_threadsafe_function,
    pending: usize,
}

thread_local! {
    static DISPATCHER: RefCell<Option<Dispatcher>> = const { RefCell::new(None) };
}

/// Registers the function that receives batches of answers:
/// `handler(answers: Float64Array, failures: Array<[token, Error]>)`, where `answers` holds
/// `token, v0, v1, v2, v3` per answer. Called once per JS environment, by `lib/engine.js`.
pub fn set_handler(env: &Env, handler: Function<Unknown, Unknown>) -> napi::Result<()> {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
    });
    let mut name = ptr::null_mut();
    let mut tsfn = ptr::null_mut();
    let context = Arc::into_raw(shared.clone()) as *mut c_void;
    unsafe {
        sys::napi_create_string_utf8(env.raw(), c"ratekeeper".as_ptr(), 10, &mut name);
        let status = sys::napi_create_threadsafe_function(
            env.raw(),
            handler.raw(),
            ptr::null_mut(),
            name,
            0,
            1,
            context,
            Some(finalize),
            context,
            Some(drain),
            &mut tsfn,
        );
        if status != sys::Status::napi_ok {
            drop(Arc::from_raw(context as *const Shared));
            return Err(napi::Error::from_reason(
                "could not create the answer channel",
            ));
        }
        // Idle until a call is pending.
        sys::napi_unref_threadsafe_function(env.raw(), tsfn);
    }
    shared.queue.lock().unwrap_or_else(|p| p.into_inner()).tsfn = Some(tsfn as usize);
    DISPATCHER.with(|d| {
        *d.borrow_mut() = Some(Dispatcher {
            shared,
            tsfn,
            pending: 0,
        })
    });
    Ok(())
}

/// Where the answer of one pending call goes: send it exactly once, from any thread.
pub struct Reply {
    shared: Arc<Shared>,
    token: u32,
    sent: bool,
}

impl Reply {
    pub fn send(mut self, outcome: Outcome<Values>) {
        self.sent = true;
        let token = self.token;
        self.shared.push(|queue| match outcome {
            Ok(values) => {
                queue.answers.push(f64::from(token));
                queue.answers.extend_from_slice(&values);
            }
            Err(failure) => queue.failures.push((token, failure)),
        });
    }
}

impl Drop for Reply {
    /// A reply dropped unsent (a bug) still settles its call, so no Promise hangs and the
    /// pending count stays right.
    fn drop(&mut self) {
        if !self.sent {
            let failure = Failure::error(
                ErrorCode::Internal,
                "a call lost its answer; please report this bug",
            );
            let token = self.token;
            self.shared
                .push(|queue| queue.failures.push((token, failure)));
        }
    }
}

/// Registers a pending call under `token`: its Promise settles when the returned [`Reply`] is
/// sent. Must be called on the JS thread.
pub fn begin(env: &Env, token: u32) -> Outcome<Reply> {
    let shared = DISPATCHER.with(|d| {
        let mut d = d.borrow_mut();
        let dispatcher = d.as_mut()?;
        dispatcher.pending += 1;
        if dispatcher.pending == 1 {
            unsafe { sys::napi_ref_threadsafe_function(env.raw(), dispatcher.tsfn) };
        }
        Some(dispatcher.shared.clone())
    });
    let shared = shared.ok_or_else(|| {
        Failure::error(
            ErrorCode::Internal,
            "the answer channel is not set up (lib/engine.js registers it)",
        )
    })?;
    Ok(Reply {
        shared,
        token,
        sent: false,
    })
}

/// Runs `work` on the runtime and sends its answer (a panic becomes `ERR_INTERNAL`).
pub fn spawn(reply: Reply, work: impl Future<Output = Outcome<Values>> + Send + 'static) {
    runtime().spawn(async move {
        let outcome = AssertUnwindSafe(work)
            .catch_unwind()
            .await
            .unwrap_or_else(|_| {
                Err(Failure::error(
                    ErrorCode::Internal,
                    "a Redis call panicked; please report this bug",
                ))
            });
        reply.send(outcome);
    });
}

/// Runs on the JS thread when answers are queued: hands them all to the handler.
unsafe extern "C" fn drain(
    env: sys::napi_env,
    handler: sys::napi_value,
    context: *mut c_void,
    _data: *mut c_void,
) {
    if env.is_null() || context.is_null() {
        return;
    }
    let shared = unsafe { &*(context as *const Shared) };
    let (answers, failures) = {
        let mut queue = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
        (
            std::mem::take(&mut queue.answers),
            std::mem::take(&mut queue.failures),
        )
    };
    let settled = answers.len() / (VALUES + 1) + failures.len();
    if settled == 0 {
        return;
    }
    DISPATCHER.with(|d| {
        if let Some(dispatcher) = d.borrow_mut().as_mut() {
            dispatcher.pending = dispatcher.pending.saturating_sub(settled);
            if dispatcher.pending == 0 {
                unsafe { sys::napi_unref_threadsafe_function(env, dispatcher.tsfn) };
            }
        }
    });
    let env = Env::from_raw(env);
    let _ = unsafe { call_handler(&env, handler, answers, failures) };
}

unsafe fn call_handler(
    env: &Env,
    handler: sys::napi_value,
    answers: Vec<f64>,
    failures: Vec<(u32, Failure)>,
) -> napi::Result<()> {
    let answers = unsafe { Float64Array::to_napi_value(env.raw(), Float64Array::new(answers))? };
    let mut list = ptr::null_mut();
    unsafe { sys::napi_create_array_with_length(env.raw(), failures.len(), &mut list) };
    for (i, (token, failure)) in failures.into_iter().enumerate() {
        let error = unsafe { ToNapiValue::to_napi_value(env.raw(), js_error(env, failure))? };
        let token = unsafe { u32::to_napi_value(env.raw(), token)? };
        let mut pair = ptr::null_mut();
        unsafe {
            sys::napi_create_array_with_length(env.raw(), 2, &mut pair);
            sys::napi_set_element(env.raw(), pair, 0, token);
            sys::napi_set_element(env.raw(), pair, 1, error);
            sys::napi_set_element(env.raw(), list, i as u32, pair);
        }
    }
    let mut undefined = ptr::null_mut();
    let mut result = ptr::null_mut();
    unsafe {
        sys::napi_get_undefined(env.raw(), &mut undefined);
        sys::napi_call_function(
            env.raw(),
            undefined,
            handler,
            2,
            [answers, list].as_ptr(),
            &mut result,
        );
    }
    Ok(())
}

/// Node is done with the threadsafe function (environment teardown): stop calling it.
unsafe extern "C" fn finalize(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    let shared = unsafe { Arc::from_raw(data as *const Shared) };
    shared.queue.lock().unwrap_or_else(|p| p.into_inner()).tsfn = None;
    DISPATCHER.with(|d| d.borrow_mut().take());
}
