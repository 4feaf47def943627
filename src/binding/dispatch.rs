//! Getting answers from Redis back to JavaScript, cheaply.
//!
//! napi-rs settles each async call through a threadsafe function of its own, created and torn
//! down per call, and builds each answer object property by property through napi: several
//! microseconds per call, more than the Redis round trip costs the CPU. Here, Redis work runs on
//! one small tokio runtime of ours; finished answers are queued as numbers (a ticket and five
//! values) and delivered to JavaScript in batches, through one long-lived threadsafe function per
//! answer channel, to the handler that `lib/engine.js` registers (one channel per loaded copy of
//! that module). JavaScript owns the Promises and
//! turns the numbers into answer objects.
//!
//! The threadsafe function keeps Node's event loop alive only while calls are pending, so an idle
//! limiter never keeps a process running.

use std::cell::RefCell;
use std::ffi::c_void;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use futures_util::FutureExt;
use napi::bindgen_prelude::{Float64Array, Float64ArraySlice, Function, ToNapiValue, Unknown};
use napi::{sys, Env, JsValue};

use super::js_error;
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::batch::Lone;

/// Numbers per answer: what an algorithm reports (its flags, waits, counts).
pub const VALUES: usize = 5;

/// The answer of one call, as numbers (`lib/engine.js` decodes them per algorithm).
pub type Values = [f64; VALUES];

/// Writes an answer given at once (in memory) into the caller's `out` array.
pub fn write_answer(out: &mut Float64ArraySlice, answer: Values) -> Outcome<()> {
    // SAFETY: `out` is a live Float64Array of the caller's, used only during this call.
    let out = unsafe { out.as_mut() };
    if out.len() < VALUES {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!("`out` must hold {VALUES} numbers"),
        ));
    }
    out[..VALUES].copy_from_slice(&answer);
    Ok(())
}

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
    /// `ticket, values...` per answer.
    answers: Vec<f64>,
    failures: Vec<(Ticket, Failure)>,
    /// The threadsafe function, until Node finalizes it.
    tsfn: Option<usize>,
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.answers.is_empty() && self.failures.is_empty()
    }
}

/// One answer channel: the queue that tokio tasks fill, and how many calls wait on it.
struct Shared {
    queue: Mutex<Queue>,
    /// Calls begun and not yet handed to JavaScript; changed on the JS thread only.
    pending: AtomicUsize,
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

    /// Queues a call's outcome for JavaScript, which gets it with the next batch.
    fn deliver(&self, ticket: Ticket, outcome: Outcome<Values>) {
        self.push(|queue| match outcome {
            Ok(values) => {
                queue.answers.push(ticket.number());
                queue.answers.extend_from_slice(&values);
            }
            Err(failure) => queue.failures.push((ticket, failure)),
        });
    }
}

thread_local! {
    /// The answer channels of this thread, by id: one per loaded copy of `lib/engine.js`
    /// (usually one; test runners such as Jest load modules afresh per test file).
    static CHANNELS: RefCell<Vec<Option<Arc<Shared>>>> = const { RefCell::new(Vec::new()) };
}

/// Registers the function that receives batches of answers:
/// `handler(answers: Float64Array, failures: Array<[ticket, Error]>)`, where `answers` holds
/// `ticket, v0, v1, v2, v3, v4` per answer. Returns the channel id that [`Ticket`]s name.
pub fn set_handler(env: &Env, handler: Function<Unknown, Unknown>) -> napi::Result<u32> {
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        pending: AtomicUsize::new(0),
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
    Ok(CHANNELS.with(|channels| {
        let mut channels = channels.borrow_mut();
        channels.push(Some(shared));
        (channels.len() - 1) as u32
    }))
}

/// Where the answer of one pending call goes: send it exactly once, from any thread.
pub struct Reply {
    shared: Arc<Shared>,
    ticket: Ticket,
    sent: bool,
    /// Nothing else of its answer channel was pending when the call began.
    lone: bool,
}

/// What the [`Reply`]s sent while [`answer_here`] ran: each one's channel, ticket and outcome.
type SentHere = Vec<(Arc<Shared>, Ticket, Outcome<Values>)>;

/// [`answer_here`]'s state on this thread.
struct Here {
    /// Whether [`answer_here`] is running: a [`Reply`] sent then is kept in `sent`.
    running: bool,
    /// Empty between calls; kept for its capacity, so that a lone call allocates nothing.
    sent: SentHere,
}

thread_local! {
    static HERE: RefCell<Here> = const {
        RefCell::new(Here {
            running: false,
            sent: Vec::new(),
        })
    };
}

/// Numbers per answer handed over at once (see [`answer_here`]): its ticket, then its values.
const RECORD: usize = 1 + VALUES;

/// Runs `answer`, which sends [`Reply`]s on this thread (the JS thread), and hands what they sent
/// to JavaScript itself instead of queueing it for the answer channel (the direct lane,
/// `src/store/direct.rs`): `out` then holds how many calls were answered, and each one's ticket
/// and values. One call of Redis may answer several (a union): when every reply succeeded and
/// `out` holds them, all are handed over; else only the first reply's outcome is (its failure
/// given back), and the others go the usual way. `None` when no reply was sent.
pub fn answer_here(env: &Env, answer: impl FnOnce(), out: &mut [f64]) -> Option<Outcome<()>> {
    HERE.with(|here| here.borrow_mut().running = true);
    answer();
    let mut sent = HERE.with(|here| {
        let mut here = here.borrow_mut();
        here.running = false;
        std::mem::take(&mut here.sent)
    });
    let handed = hand_over(env, &mut sent, out);
    HERE.with(|here| here.borrow_mut().sent = sent);
    handed
}

/// [`answer_here`]'s hand-over of `sent` (left empty) into `out`.
fn hand_over(env: &Env, sent: &mut SentHere, out: &mut [f64]) -> Option<Outcome<()>> {
    if sent.is_empty() {
        return None;
    }
    // `out` holds the count, then a record per answer.
    let all_fit = sent.len() * RECORD < out.len();
    if all_fit && sent.iter().all(|(_, _, outcome)| outcome.is_ok()) {
        out[0] = sent.len() as f64;
        for ((shared, ticket, outcome), record) in
            sent.drain(..).zip(out[1..].chunks_exact_mut(RECORD))
        {
            settled(env, &shared, 1);
            if let Ok(values) = outcome {
                record[0] = ticket.number();
                record[1..].copy_from_slice(&values);
            }
        }
        return Some(Ok(()));
    }
    let mut rest = sent.drain(..);
    let (shared, ticket, first) = rest.next()?;
    settled(env, &shared, 1);
    for (shared, ticket, outcome) in rest {
        shared.deliver(ticket, outcome);
    }
    Some(first.and_then(|values| match out.get_mut(..1 + RECORD) {
        Some(record) => {
            record[0] = 1.0;
            record[1] = ticket.number();
            record[2..].copy_from_slice(&values);
            Ok(())
        }
        None => Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!("`out` must hold {} numbers", 1 + RECORD),
        )),
    }))
}

/// `count` calls of `shared` were handed to JavaScript: once none is pending, the channel no
/// longer keeps the process alive.
fn settled(env: &Env, shared: &Shared, count: usize) {
    let before = shared.pending.fetch_sub(count, Ordering::Relaxed);
    let tsfn = shared.queue.lock().unwrap_or_else(|p| p.into_inner()).tsfn;
    if let (true, Some(tsfn)) = (before == count, tsfn) {
        // Nothing pending any more: let the process exit if nothing else holds it.
        unsafe {
            sys::napi_unref_threadsafe_function(env.raw(), tsfn as sys::napi_threadsafe_function)
        };
    }
}

impl Reply {
    /// When nothing else of its answer channel was pending as the call began (a lone caller's
    /// call, which may take the direct lane, `src/store/direct.rs`): the channel's id and the
    /// call's ticket.
    pub fn lone(&self) -> Option<Lone> {
        self.lone.then(|| Lone {
            channel: self.ticket.channel,
            ticket: self.ticket.number(),
            now_at: None,
        })
    }

    pub fn send(mut self, outcome: Outcome<Values>) {
        self.sent = true;
        let outcome = HERE.with(|here| {
            let mut here = here.borrow_mut();
            if !here.running {
                return Some(outcome);
            }
            here.sent.push((self.shared.clone(), self.ticket, outcome));
            None
        });
        if let Some(outcome) = outcome {
            self.shared.deliver(self.ticket, outcome);
        }
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
            let ticket = self.ticket;
            self.shared
                .push(|queue| queue.failures.push((ticket, failure)));
        }
    }
}

/// Where the answer of a call goes: the answer channel of the `lib/engine.js` that made the
/// call, and the call's token there. JavaScript passes it as one number,
/// `channel * 2 ** 32 + token`, which the answer carries back.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    pub channel: u32,
    pub token: u32,
}

impl Ticket {
    pub fn from_number(number: f64) -> Outcome<Self> {
        if !(number.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&number)) {
            return Err(Failure::range_error(
                ErrorCode::InvalidArgument,
                "a ticket is a whole number below 2 ** 53",
            ));
        }
        let number = number as u64;
        Ok(Self {
            channel: (number >> 32) as u32,
            token: number as u32,
        })
    }

    fn number(self) -> f64 {
        ((u64::from(self.channel) << 32) | u64::from(self.token)) as f64
    }
}

/// Registers a pending call: its Promise settles when the returned [`Reply`] is sent.
/// Must be called on the JS thread.
pub fn begin(env: &Env, ticket: Ticket) -> Outcome<Reply> {
    let shared = CHANNELS
        .with(|channels| {
            channels
                .borrow()
                .get(ticket.channel as usize)
                .cloned()
                .flatten()
        })
        .ok_or_else(|| {
            Failure::error(
                ErrorCode::Internal,
                "no such answer channel (lib/engine.js registers one)",
            )
        })?;
    let lone = shared.pending.fetch_add(1, Ordering::Relaxed) == 0;
    if lone {
        // Keep the event loop alive while calls are pending.
        let tsfn = shared.queue.lock().unwrap_or_else(|p| p.into_inner()).tsfn;
        if let Some(tsfn) = tsfn {
            unsafe {
                sys::napi_ref_threadsafe_function(env.raw(), tsfn as sys::napi_threadsafe_function)
            };
        }
    }
    Ok(Reply {
        shared,
        ticket,
        sent: false,
        lone,
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
    let count = answers.len() / (VALUES + 1) + failures.len();
    if count == 0 {
        return;
    }
    let env = Env::from_raw(env);
    settled(&env, shared, count);
    // A panic must not unwind into Node (it would abort the process).
    let _ = std::panic::catch_unwind(AssertUnwindSafe(|| unsafe {
        call_handler(&env, handler, answers, failures)
    }));
}

unsafe fn call_handler(
    env: &Env,
    handler: sys::napi_value,
    answers: Vec<f64>,
    failures: Vec<(Ticket, Failure)>,
) -> napi::Result<()> {
    let answers = unsafe { Float64Array::to_napi_value(env.raw(), Float64Array::new(answers))? };
    let mut list = ptr::null_mut();
    unsafe { sys::napi_create_array_with_length(env.raw(), failures.len(), &mut list) };
    for (i, (ticket, failure)) in failures.into_iter().enumerate() {
        let error = unsafe { ToNapiValue::to_napi_value(env.raw(), js_error(env, failure))? };
        let ticket = unsafe { f64::to_napi_value(env.raw(), ticket.number())? };
        let mut pair = ptr::null_mut();
        unsafe {
            sys::napi_create_array_with_length(env.raw(), 2, &mut pair);
            sys::napi_set_element(env.raw(), pair, 0, ticket);
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
    CHANNELS.with(|channels| {
        for channel in channels.borrow_mut().iter_mut() {
            if channel
                .as_ref()
                .is_some_and(|current| Arc::ptr_eq(current, &shared))
            {
                channel.take();
            }
        }
    });
}
