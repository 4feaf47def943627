//! Batching the calls of a script: concurrent calls of one limiter leave together in one
//! `FCALL` or `EVALSHA` (see [`super::script`]), with a key (or a few) per call.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redis::Value;
use tokio::sync::mpsc;

use super::direct::Offer;
use super::redis::RedisStore;
use super::script::{compact_configuration, LuaScript};
use crate::error::{ErrorCode, Failure, Outcome};

/// The most calls one EVALSHA carries.
const MAX_BATCH: usize = 256;

/// Batches of one batcher in flight at once: two, so that Redis runs one while the next fills.
const BATCHES_IN_FLIGHT: usize = 2;

/// Held calls of a batcher leave at once when there are this many, without waiting for the end
/// of the turn: Redis then runs them while JavaScript makes the next ones.
const SEND_EARLY_AT: usize = 32;

/// What to do with a call's answer; it runs on the runtime's thread.
pub type Answered = Box<dyn FnOnce(Outcome<Answer>) + Send>;

/// One call's answer from a batch.
pub struct Answer {
    /// What the script answered for the call.
    pub value: Value,
    /// The Redis server's clock (microseconds) when the script read it for the batch's calls
    /// without a `now` of their own, if it says so (see [`ScriptBatcher`]).
    pub server_now: Option<i64>,
    /// How far (microseconds) `server_now` may be behind the server's clock as the call was
    /// written: 0 when the script read it, more when a direct lane sent its estimate
    /// (`super::direct`). Waits are to count from that later instant (see
    /// `Verdict::counted_from_later`).
    pub server_now_lag: i64,
}

/// Sends the calls of one script that share their leading arguments together: one EVALSHA with
/// the keys and arguments of every call waiting, at most [`MAX_BATCH`] calls.
///
/// A call submitted is held until [`send_held_calls`], which `lib/engine.js` runs once per turn of
/// Node's event loop (as ioredis's auto-pipelining does): the calls that an app makes while it
/// handles what one turn brought (a burst of requests) leave together, in one EVALSHA that Redis
/// reads in one go, instead of the first ones alone. At most [`BATCHES_IN_FLIGHT`] batches are
/// in flight: meanwhile new calls queue up and leave together in the next one. This spreads the
/// script's fixed cost (and a round trip, and Redis's reading and writing of a command) over many
/// calls. Every call is answered within `commandTimeoutMs` of leaving the JS thread. On a
/// Cluster, whose keys live on different nodes, every call is sent alone, at once.
///
/// The script's contract: `ARGV` holds the shared arguments, then the batch's shape and the
/// calls' arguments (see [`call_arguments`]); `KEYS` each call's keys in turn (the script knows
/// from the arguments how many are whose); the reply holds one answer per call, in order (a
/// number or an array, or the error message, a string, of a call that failed alone), and may end
/// with one more value: the server's clock as the script read it (for the calls without a `now`
/// of their own, whose answers then need not repeat it).
#[derive(Clone)]
pub struct ScriptBatcher {
    store: Arc<RedisStore>,
    script: &'static LuaScript,
    shared: Arc<Vec<String>>,
    /// `shared` as a lone call sends it to the script's compact entry, joined once (see
    /// [`super::script::compact_configuration`]).
    compact: Option<Arc<str>>,
    runtime: tokio::runtime::Handle,
    queue: Option<Arc<CallQueue>>,
}

/// The way to a batcher's sending task, and the calls held for it on the JS thread.
struct CallQueue {
    held: Mutex<Held>,
    /// Calls with the instant they left the JS thread, from which their timeout runs (the time
    /// they were held is the JS thread's own, busy with the rest of its turn, not Redis's).
    sender: mpsc::UnboundedSender<(Instant, Vec<Call>)>,
}

#[derive(Default)]
struct Held {
    calls: Vec<Call>,
    /// In this thread's [`HOLDING`] list.
    listed: bool,
}

impl CallQueue {
    /// Hands the held calls to the sending task (one wake-up of the runtime's thread).
    fn send_held(&self) {
        let calls = std::mem::take(&mut self.held.lock().unwrap_or_else(|p| p.into_inner()).calls);
        self.send(calls);
    }

    fn send(&self, calls: Vec<Call>) {
        if calls.is_empty() {
            return;
        }
        if let Err(mpsc::error::SendError((_, unsent))) = self.sender.send((Instant::now(), calls))
        {
            for call in unsent {
                (call.answered)(Err(Failure::error(
                    ErrorCode::Internal,
                    "the batch sender stopped",
                )));
            }
        }
    }
}

thread_local! {
    /// The batchers of this thread (the JS thread) holding calls, for [`send_held_calls`].
    static HOLDING: RefCell<Vec<ScriptBatcher>> = const { RefCell::new(Vec::new()) };
}

/// Sends every call held on this thread to its batcher (see [`ScriptBatcher`]). When the only
/// call held is a lone call of the answer channel `channel`, it is offered to the direct lane
/// instead ([`super::direct::offer`]): the answer is then its ticket, for JavaScript to take it.
/// (Decided here, once the turn is over: the calls of a turn that made several leave together,
/// in order, the usual way. A lone call may have left by its lane before: [`send_lone_call`].)
pub fn send_held_calls(channel: Option<u32>) -> Option<f64> {
    super::direct::release_offer();
    let batchers = HOLDING.with(|holding| std::mem::take(&mut *holding.borrow_mut()));
    let offered = match (batchers.as_slice(), channel) {
        ([batcher], Some(channel)) => batcher.queue.as_ref().and_then(|queue| {
            let mut held = queue.held.lock().unwrap_or_else(|p| p.into_inner());
            offer_lone(batcher, &mut held, channel, true)
        }),
        _ => None,
    };
    for batcher in batchers {
        if let Some(queue) = &batcher.queue {
            queue.held.lock().unwrap_or_else(|p| p.into_inner()).listed = false;
            queue.send_held();
        }
    }
    offered
}

/// Sends the call held on this thread by its direct lane before the turn ends, when it is the only
/// call held, a lone call of the answer channel `channel`, and its lane is open: its ticket then,
/// for JavaScript to take the call ([`super::direct::take`]). Otherwise nothing is sent, and the
/// calls held wait for [`send_held_calls`] at the end of the turn, which opens a lane a lone call
/// wanted. (A lone call's turn may not be over yet: the calls made later in it, the lane's
/// carried, are then held until that call is answered, see [`super::direct::route`].)
pub fn send_lone_call(channel: u32) -> Option<f64> {
    let batcher = HOLDING.with(|holding| match holding.borrow().as_slice() {
        [batcher] => Some(batcher.clone()),
        _ => None,
    })?;
    let queue = batcher.queue.as_ref()?;
    let mut held = queue.held.lock().unwrap_or_else(|p| p.into_inner());
    let ticket = offer_lone(&batcher, &mut held, channel, false)?;
    held.listed = false;
    drop(held);
    HOLDING.with(|holding| holding.borrow_mut().clear());
    Some(ticket)
}

/// Offers the call `batcher` holds (`held`) to the direct lane when it is the only one and a lone
/// call of `channel`: its ticket when JavaScript has something to take (the call; or, when
/// `open_lanes`, a lane to open, the call then staying held).
fn offer_lone(
    batcher: &ScriptBatcher,
    held: &mut Held,
    channel: u32,
    open_lanes: bool,
) -> Option<f64> {
    let lone = match held.calls.as_slice() {
        [call] => call.lone.filter(|lone| lone.channel == channel)?,
        _ => return None,
    };
    let call = held.calls.pop()?;
    let (call, for_javascript) = match super::direct::offer(batcher, call, open_lanes) {
        Offer::Taken => return Some(lone.ticket),
        Offer::Wanted(call) => (call, open_lanes),
        Offer::Declined(call) => (call, false),
    };
    held.calls.push(call);
    for_javascript.then_some(lone.ticket)
}

pub(super) struct Call {
    /// The call's keys and arguments.
    pub(super) work: (Vec<String>, Vec<String>),
    pub(super) answered: Answered,
    pub(super) lone: Option<Lone>,
}

/// A lone call (nothing else of its caller pending as it began): its answer channel and ticket
/// (see `src/binding/dispatch.rs`), and where its arguments hold its `now`, if anywhere.
#[derive(Debug, Clone, Copy)]
pub struct Lone {
    pub channel: u32,
    pub ticket: f64,
    /// The index of the call's `now` in its arguments, for a script that reads the server's
    /// clock for `""`: a direct lane may send its estimate of that clock there instead, as
    /// `~<now>` (`super::direct`), which the script takes as the server's `now` and answers as
    /// such.
    pub now_at: Option<usize>,
}

impl Lone {
    /// This call's `now` is its argument number `index` (see [`Lone::now_at`]).
    pub fn with_now_at(self, index: usize) -> Self {
        Self {
            now_at: Some(index),
            ..self
        }
    }
}

impl ScriptBatcher {
    /// `runtime` runs the task that sends the batches.
    pub fn new(
        runtime: &tokio::runtime::Handle,
        store: Arc<RedisStore>,
        script: &'static LuaScript,
        shared: Vec<String>,
    ) -> Self {
        let shared = Arc::new(shared);
        let queue = (!store.config().is_cluster()).then(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            runtime.spawn(send_batches(
                store.clone(),
                script,
                shared.clone(),
                receiver,
            ));
            Arc::new(CallQueue {
                held: Mutex::new(Held::default()),
                sender,
            })
        });
        Self {
            store,
            script,
            compact: compact_configuration(&shared).map(Arc::from),
            shared,
            runtime: runtime.clone(),
            queue,
        }
    }

    /// Runs the script for one call; `answered` gets its answer, or the failure, within
    /// `commandTimeoutMs` of the call leaving this thread. Called on the JS thread, which must then
    /// run [`send_held_calls`]. A `lone` call (nothing else of its caller pending) that is still
    /// the only one held when it is sent ([`send_lone_call`], [`send_held_calls`]) may go by the
    /// direct lane instead (see [`super::direct`]).
    pub fn submit(
        &self,
        keys: Vec<String>,
        args: Vec<String>,
        answered: Answered,
        lone: Option<Lone>,
    ) {
        let call = Call {
            work: (keys, args),
            answered,
            lone,
        };
        if let Some(call) = super::direct::route(self, call) {
            self.hold(call);
        }
    }

    pub(super) fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    pub(super) fn script(&self) -> &'static LuaScript {
        self.script
    }

    pub(super) fn shared(&self) -> &[String] {
        &self.shared
    }

    /// The configuration a lone call sends to the script's compact entry, if it can.
    pub(super) fn compact_configuration(&self) -> Option<&str> {
        self.compact.as_deref()
    }

    /// The usual way: the call is held until [`send_held_calls`] (or sent with those held when
    /// they are many; on a Cluster, sent alone at once).
    pub(super) fn hold(&self, call: Call) {
        let Some(queue) = &self.queue else {
            let (store, script, shared) = (self.store.clone(), self.script, self.shared.clone());
            self.runtime.spawn(async move {
                let answer = store
                    .bounded(store.eval_batch(script, &shared, std::slice::from_ref(&call.work)))
                    .await
                    .and_then(|mut answers| answers.pop().unwrap_or_else(|| Err(short_reply())));
                store.count_call(&answer);
                (call.answered)(answer);
            });
            return;
        };
        let mut held = queue.held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.listed {
            held.listed = true;
            HOLDING.with(|holding| holding.borrow_mut().push(self.clone()));
        }
        held.calls.push(call);
        if held.calls.len() >= SEND_EARLY_AT {
            let calls = std::mem::take(&mut held.calls);
            drop(held);
            queue.send(calls);
        }
    }

    /// Sends `call` now, without waiting for the end of the turn.
    pub(super) fn send_now(&self, call: Call) {
        match &self.queue {
            Some(queue) => queue.send(vec![call]),
            None => self.hold(call),
        }
    }
}

async fn send_batches(
    store: Arc<RedisStore>,
    script: &'static LuaScript,
    shared: Arc<Vec<String>>,
    mut receiver: mpsc::UnboundedReceiver<(Instant, Vec<Call>)>,
) {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(BATCHES_IN_FLIGHT));
    // Calls received, oldest first, and not sent yet, each with the instant it left the JS thread.
    let mut waiting = VecDeque::new();
    let receive = |waiting: &mut VecDeque<_>, (since, calls): (Instant, Vec<Call>)| {
        waiting.extend(calls.into_iter().map(|call| (since, call)));
    };
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        if waiting.is_empty() {
            match receiver.recv().await {
                Some(calls) => receive(&mut waiting, calls),
                None => return,
            }
        }
        while let Ok(calls) = receiver.try_recv() {
            receive(&mut waiting, calls);
        }
        let calls: Vec<_> = waiting.drain(..waiting.len().min(MAX_BATCH)).collect();
        let (store, shared) = (store.clone(), shared.clone());
        tokio::spawn(async move {
            send_batch(&store, script, &shared, calls).await;
            drop(permit);
        });
    }
}

/// Sends one batch (its calls, each with the instant its timeout runs from) and hands out its
/// answers.
async fn send_batch(
    store: &RedisStore,
    script: &LuaScript,
    shared: &[String],
    batch: Vec<(Instant, Call)>,
) {
    // Calls that spent their whole timeout queued fail now; the batch gets what is left of the
    // oldest remaining call's timeout.
    let timeout = store.config().command_timeout();
    let now = Instant::now();
    let (expired, live): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .partition(|(since, _)| now.duration_since(*since) >= timeout);
    for (_, call) in expired {
        answer(store, call.answered, Err(store.timeout_failure()));
    }
    let Some(oldest) = live.iter().map(|(since, _)| *since).min() else {
        return;
    };
    let budget = timeout.saturating_sub(now.duration_since(oldest));
    let (calls, answered): (Vec<_>, Vec<_>) = live
        .into_iter()
        .map(|(_, call)| (call.work, call.answered))
        .unzip();
    match store
        .bounded_for(budget, store.eval_batch(script, shared, &calls))
        .await
    {
        Ok(answers) => {
            for (answered, outcome) in answered.into_iter().zip(answers) {
                answer(store, answered, outcome);
            }
        }
        Err(failure) => {
            for answered in answered {
                answer(store, answered, Err(failure.clone()));
            }
        }
    }
}

fn answer(store: &RedisStore, answered: Answered, outcome: Outcome<Answer>) {
    store.count_call(&outcome);
    answered(outcome);
}

pub(super) fn short_reply() -> Failure {
    Failure::error(
        ErrorCode::StoreError,
        "the script's reply does not hold one answer per call",
    )
}

/// The text of the error a script answers for a call that failed alone (`answer_of` in
/// `lua/prelude.lua`). Redis 6.2 words the errors it raises before running a script's command
/// (`READONLY` on a replica, `OOM` at maxmemory) with the script's position, the protocol's `-`
/// and its line end (`@user_script: 225: -READONLY You can't write against a read only
/// replica.\r\n`); Redis 7, and every error of a command that ran, give the text alone. Both
/// read here as the text alone, so that `READONLY` is known on both.
pub(super) fn call_error_text(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let positioned = text.strip_prefix("@user_script:").and_then(|rest| {
        let rest = rest.trim_start();
        let line_end = rest.find(|c: char| !c.is_ascii_digit())?;
        let error = rest[line_end..].strip_prefix(':')?.trim_start();
        (line_end > 0).then(|| error.strip_prefix('-').unwrap_or(error))
    });
    positioned.unwrap_or(&text).trim_end().to_owned()
}

/// The calls' arguments as a batch sends them: the shape, a byte per call (`+` when the call's
/// arguments follow, `=` when they are the previous call's), then the arguments of each `+` call
/// in turn. Most calls of a batch have the same arguments (the server's clock, weight 1), and
/// each argument costs Redis more than the byte: `each_call` in `lua/prelude.lua` reads this.
pub(super) fn call_arguments(calls: &[(Vec<String>, Vec<String>)]) -> (String, Vec<&String>) {
    let mut shape = String::with_capacity(calls.len());
    let mut args = Vec::new();
    let mut previous: Option<&Vec<String>> = None;
    for (_, call_args) in calls {
        if previous == Some(call_args) {
            shape.push('=');
        } else {
            shape.push('+');
            args.extend(call_args);
        }
        previous = Some(call_args);
    }
    (shape, args)
}

#[cfg(test)]
mod tests {
    use super::{call_arguments, call_error_text};

    #[test]
    fn a_call_error_reads_the_same_from_redis_6_2_and_7() {
        let readonly = "READONLY You can't write against a read only replica.";
        for raw in [
            format!("@user_script: 225: -{readonly}\r\n"),
            format!("@user_script:7: -{readonly}"),
            readonly.to_owned(),
        ] {
            assert_eq!(call_error_text(raw.as_bytes()), readonly, "{raw:?}");
        }
        // Other texts are kept whole: a script's own errors, and Lua's.
        for raw in [
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "ERR ratekeeper: k holds a field x (not written by this limiter: reset the id or delete the key)",
            "user_script:12: attempt to compare nil with number",
            "@user_script: nope: -x",
        ] {
            assert_eq!(call_error_text(raw.as_bytes()), raw);
        }
    }

    fn call(args: &[&str]) -> (Vec<String>, Vec<String>) {
        (vec!["key".into()], args.iter().map(|&a| a.into()).collect())
    }

    #[test]
    fn a_call_repeating_the_previous_calls_arguments_sends_none() {
        let calls = [
            call(&["1", "", "1"]),
            call(&["1", "", "1"]),
            call(&["1", "", "2"]),
            call(&["1", "", "1"]),
            call(&["1", "", "1"]),
        ];
        let (shape, args) = call_arguments(&calls);
        assert_eq!(shape, "+=++=");
        assert_eq!(args, ["1", "", "1", "1", "", "2", "1", "", "1"]);
    }

    #[test]
    fn calls_without_arguments_are_all_repeats_after_the_first() {
        let calls = [call(&[]), call(&[])];
        let (shape, args) = call_arguments(&calls);
        assert_eq!(shape, "+=");
        assert!(args.is_empty());
    }
}
