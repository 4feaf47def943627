//! The direct lane: a lone call's script, written and read by the JS thread itself.
//!
//! A call goes to Redis through the runtime's thread (see [`super::batch`]): the JS thread hands
//! it over, the runtime sends it, and its answer comes back to the JS thread through the answer
//! channel. Under load, those hand-offs carry hundreds of calls each. A lone caller (one request
//! at a time, a cron job, a CLI) pays both for one call: on an idle machine each wake-up of a
//! sleeping thread costs 20-30 µs, more than Redis spends on the script (benchmark/RESULTS.md,
//! item 27). So a call that found nothing else of its caller pending, and is still the only one
//! held once the microtasks queued before it have run, or else when its turn of the event loop
//! ends ([`offer`], from [`super::batch::send_lone_call`] or [`super::batch::send_held_calls`]:
//! the lane is opened at the end of a turn), is packed here, on the JS thread, into
//! its EVALSHA, or its `FCALL` of the Function's compact entry (the configuration as one
//! argument: [`super::script::LuaScript::compact_request`]), which `lib/direct.js` writes on a
//! socket of its own to the node (a single node, or the primary found through Sentinel) and
//! whose reply it hands back ([`read`]): the JS thread wakes once per call, as with a JavaScript
//! client.
//!
//! The lane carries one call at a time; calls made meanwhile wait for its answer and then go
//! the usual way ([`route`]), so that calls leave in the order they were made. Anything unusual
//! goes the usual way too: a node whose connection the runtime has not opened (or lost), TLS,
//! a Cluster ([`super::redis::RedisStore::direct_node`]), and any error Redis answers in place of running
//! the script (`NOSCRIPT`, `MOVED`, `READONLY`, `LOADING`...), which the runtime then deals with.
//! A call whose connection fails, or that gets no answer within `commandTimeoutMs`, fails as it
//! would on the runtime's connection ([`fail`]).
//!
//! A lone call on the server's clock does not make Redis read it (`TIME`: 1 to 2.5 µs of a lone
//! call's Redis time, benchmark/RESULTS.md items 44 and 45) once the lane knows that clock: it
//! carries the lane's estimate ([`ServerClock`]) as `~<now>`, which the scripts take as the
//! server's `now` (`lone_now` in `lua/lone.lua`, `now_of` in `lua/prelude.lua`). The estimate is
//! never ahead of the server's clock as Redis runs the call, and never behind a `now` that any
//! call of this process was answered with before it: so the instants at which one server judges
//! this process's calls keep their order, as with `TIME`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, Value};

use super::batch::{short_reply, Call, ScriptBatcher};
use super::cluster::Node;
use super::redis::RedisStore;
use crate::error::{ErrorCode, Failure, Outcome};

/// The most bytes a reply may take: a script's answer for one call is a few numbers (a sliding
/// log's entries may be more); past this, the lane is confused.
const MAX_REPLY: usize = 64 << 20;

thread_local! {
    static LANE: RefCell<Lane> = RefCell::new(Lane::default());
}

#[derive(Default)]
struct Lane {
    /// Off for tests of the runtime's path.
    disabled: bool,
    /// Every lane asked for, by number (as JavaScript names it), and its number by where it
    /// goes: an answer channel's, to a store's node.
    lanes: Vec<LaneState>,
    numbers: HashMap<(u32, u64, Node), u32>,
    /// A lane a lone call could not take because it is not open: for JavaScript to open.
    wanted: Option<u32>,
    /// The call [`offer`] took, until JavaScript takes it ([`take`]).
    offered: Option<Direct>,
    /// The call on the lane, waiting for its reply.
    in_flight: Option<Direct>,
    /// Calls made meanwhile, sent the usual way once the lane's call is answered.
    deferred: Vec<(ScriptBatcher, Call)>,
}

struct LaneState {
    /// (Not kept alive by its lanes.)
    store: Weak<RedisStore>,
    node: Node,
    /// JavaScript has it open.
    ready: bool,
    /// The node's clock, as the lane's replies told it.
    clock: ServerClock,
}

struct Direct {
    batcher: ScriptBatcher,
    call: Call,
    /// The lane's number.
    lane: u32,
    /// The EVALSHA or FCALL, then the reply's bytes as they arrive.
    bytes: Vec<u8>,
    /// The lane's estimate of the server's clock that the call carries, if it carries one.
    estimate: Option<Estimate>,
    /// When JavaScript took it to write.
    sent_at: Option<Instant>,
}

impl Direct {
    /// The call's first key, by which failures name the node.
    fn first_key(&self) -> &str {
        self.call.work.0.first().map_or("", String::as_str)
    }

    /// The call as the usual way sends it: on the server's clock as its batch reads it, not the
    /// lane's estimate.
    fn usual_call(mut self) -> Call {
        if let Some(estimate) = self.estimate {
            self.call.work.1[estimate.at] = String::new();
        }
        self.call
    }
}

/// The lane's estimate of the server's clock in a call: at index `at` of its arguments, behind
/// the server's clock as the call was written by up to `lag` microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Estimate {
    at: usize,
    lag: i64,
}

/// Script replies answered to this process so far, by any store, lane or batch. A lane's estimate
/// holds only while no reply came but its own calls' ([`ServerClock::seen`]): any other may
/// carry a `now` that the server read later than the estimate's sample, and the estimate must
/// not fall behind it.
static REPLIES: AtomicU64 = AtomicU64::new(0);

/// Counts a script reply that came to this process the usual way (a batch's, answered or
/// failed: a script may have read the server's clock either way).
pub(super) fn count_reply() {
    REPLIES.fetch_add(1, Ordering::AcqRel);
}

/// The longest round trip whose reply a lane learns the server's clock from: the estimate lags
/// the clock by at most the sample's round trip.
const CLOCK_SAMPLE_ROUND_TRIP: Duration = Duration::from_millis(1);

/// How long a lane uses a sample: then a call reads the clock again, so that a server's clock
/// set anew is followed within this.
const CLOCK_SAMPLE_FOR: Duration = Duration::from_millis(100);

/// How far this host's monotonic clock may run ahead of the server's, in microseconds per
/// second: taken off the estimate (NTP slews a clock by at most 500 ppm).
const CLOCK_DRIFT_PPM: i64 = 1000;

/// A lane's estimate of its node's clock, from a call written at `sent_at` whose script read
/// `TIME` (`server_now`, microseconds) and whose reply came at `answered_at`. The server read it
/// between the two, so for a call written at `t` the server's clock is at least `server_now +
/// (t - answered_at)` when it runs the call (less what this host's clock may drift meanwhile):
/// the estimate. It was at most `server_now + (t - sent_at)` at `t` (plus the drift): the
/// estimate lags it by the sample's round trip (no more than [`CLOCK_SAMPLE_ROUND_TRIP`]),
/// twice the drift allowed and a rounding, at most: the call's answer counts its waits from there
/// (`Verdict::counted_from_later`), so that they end no later than with `TIME`.
#[derive(Default)]
struct ServerClock {
    sample: Option<ClockSample>,
}

#[derive(Clone, Copy)]
struct ClockSample {
    server_now: i64,
    answered_at: Instant,
    /// The sample's round trip, in microseconds.
    round_trip: i64,
    /// [`REPLIES`] after the lane's last reply: another reply since ends the sample.
    seen: u64,
}

impl ServerClock {
    /// The server's clock, in microseconds, for a call written at `at` while [`REPLIES`] is
    /// `replies`, and how far behind it the estimate may be; `None` without a sample that holds.
    fn estimate(&self, at: Instant, replies: u64) -> Option<(i64, i64)> {
        let sample = self.sample.filter(|sample| sample.seen == replies)?;
        let since = at.checked_duration_since(sample.answered_at)?;
        if since > CLOCK_SAMPLE_FOR {
            return None;
        }
        let micros = since.as_micros() as i64;
        let drift = (micros * CLOCK_DRIFT_PPM + 999_999) / 1_000_000;
        // (The lag: 2 µs more for the roundings of `micros` and of the drift.)
        Some((
            sample.server_now + micros - drift,
            sample.round_trip + 2 * drift + 2,
        ))
    }

    /// Learns from the lane's call written at `sent_at`, answered at `answered_at` (the
    /// [`REPLIES`] count `before` it, `before + 1` with it), which carried the lane's estimate
    /// (`estimated`) or not, and answered `server_now` (the server's clock as its script read
    /// it, or the estimate it carried).
    fn learn(
        &mut self,
        estimated: bool,
        sent_at: Instant,
        answered_at: Instant,
        server_now: Option<i64>,
        before: u64,
    ) {
        let round_trip = answered_at.saturating_duration_since(sent_at);
        match (estimated, server_now) {
            // The lane's own estimate, answered: no later than the sample's next ones.
            (true, _) => {
                if let Some(sample) = self.sample.as_mut().filter(|sample| sample.seen == before) {
                    sample.seen = before + 1;
                }
            }
            // The server's clock as a script read it, quickly: the next sample.
            (_, Some(server_now)) if round_trip <= CLOCK_SAMPLE_ROUND_TRIP => {
                self.sample = Some(ClockSample {
                    server_now,
                    answered_at,
                    // (Whole microseconds, rounded up.)
                    round_trip: round_trip.as_nanos().div_ceil(1000) as i64,
                    seen: before + 1,
                });
            }
            // A slow reply that read the clock, a script that may have read it without saying
            // (the bucket circle's), a call passed on or failed: the server may have judged at a
            // later instant than the sample's next estimates.
            _ => self.sample = None,
        }
    }
}

/// Where JavaScript opens a lane: the node, and what to send first (`AUTH`, `SELECT`).
pub struct LaneAddress {
    /// The lane's number, by which JavaScript and [`set_ready`] name it.
    pub lane: u32,
    /// The store's id ([`RedisStore::id`]).
    pub store: u64,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub path: Option<String>,
    pub handshake: Vec<u8>,
    /// How many replies the handshake gets.
    pub replies: u32,
    pub connect_timeout_ms: f64,
}

/// What [`take`] hands JavaScript after a call.
pub enum Taken {
    /// The call goes by lane number `lane`: write `request` there; it fails after `timeout_ms`.
    Call {
        lane: u32,
        request: Vec<u8>,
        timeout_ms: f64,
    },
    /// The call went the usual way, for want of an open lane: open this one.
    Open(LaneAddress),
}

/// What [`read`] made of the bytes so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// The reply is not complete yet.
    More,
    /// The call was answered. `released_calls`: calls made meanwhile were held for it, and now
    /// wait to be sent (`sendHeldCalls`); without them, there is nothing to send.
    Answered { released_calls: bool },
    /// Redis answered with an error in place of running the script: the call was sent again the
    /// usual way, which answers it.
    PassedOn,
    /// The bytes are not the reply of a call on the lane: the lane must close, and its call
    /// fail ([`fail`]).
    Confused,
}

/// Gives `call` back to be held the usual way, unless the lane carries a call: then it waits
/// for that call's answer (calls leave in the order they were made).
pub(super) fn route(batcher: &ScriptBatcher, call: Call) -> Option<Call> {
    LANE.with(|lane| {
        let mut lane = lane.borrow_mut();
        if lane.in_flight.is_some() {
            lane.deferred.push((batcher.clone(), call));
            return None;
        }
        Some(call)
    })
}

/// What [`offer`] did with a call.
pub(super) enum Offer {
    /// Offered to the lane, for JavaScript to [`take`].
    Taken,
    /// Given back: its lane is not open yet (JavaScript is asked to open it, [`take`], when the
    /// offer said so).
    Wanted(Call),
    /// Given back: it cannot go by a lane (lanes off, TLS, a Cluster, a node without an open
    /// connection).
    Declined(Call),
}

/// Offers a lone call (the only one held: see [`super::batch::send_held_calls`] and
/// [`super::batch::send_lone_call`]) to the direct lane. A lane not open yet is asked of
/// JavaScript only when `open_lanes`.
pub(super) fn offer(batcher: &ScriptBatcher, mut call: Call, open_lanes: bool) -> Offer {
    LANE.with(|lane| {
        let mut lane = lane.borrow_mut();
        let (Some(lone), false, None) = (call.lone, lane.disabled, &lane.in_flight) else {
            return Offer::Declined(call);
        };
        let store = batcher.store();
        let Some(node) = store.direct_node() else {
            return Offer::Declined(call);
        };
        let target = (lone.channel, store.id(), node);
        let number = match lane.numbers.get(&target) {
            Some(&number) => number,
            None => {
                let number = lane.lanes.len() as u32;
                lane.lanes.push(LaneState {
                    store: Arc::downgrade(store),
                    node: target.2.clone(),
                    ready: false,
                    clock: ServerClock::default(),
                });
                lane.numbers.insert(target, number);
                number
            }
        };
        if !lane.lanes[number as usize].ready {
            if open_lanes {
                lane.wanted = Some(number);
            }
            return Offer::Wanted(call);
        }
        // (Without an estimate, a call on the server's clock sends "": its script reads TIME.)
        let estimate = lone
            .now_at
            .filter(|&at| call.work.1.get(at).is_some_and(String::is_empty))
            .and_then(|at| {
                let replies = REPLIES.load(Ordering::Acquire);
                let (now, lag) = lane.lanes[number as usize]
                    .clock
                    .estimate(Instant::now(), replies)?;
                call.work.1[at] = format!("~{now}");
                Some(Estimate { at, lag })
            });
        let (keys, args) = &call.work;
        let request = batcher
            .compact_configuration()
            .and_then(|configuration| {
                batcher
                    .script()
                    .compact_request(store.counters(), configuration, keys, args)
            })
            .unwrap_or_else(|| {
                super::redis::batch_command(
                    batcher.script(),
                    store.counters(),
                    batcher.shared(),
                    std::slice::from_ref(&call.work),
                )
                .get_packed_command()
            });
        lane.offered = Some(Direct {
            batcher: batcher.clone(),
            call,
            lane: number,
            bytes: request,
            estimate,
            sent_at: None,
        });
        Offer::Taken
    })
}

/// Sends the call offered to the lane the usual way if JavaScript did not take it ([`take`]):
/// never left behind, whatever JavaScript does.
pub(super) fn release_offer() {
    if let Some(offered) = LANE.with(|lane| lane.borrow_mut().offered.take()) {
        let batcher = offered.batcher.clone();
        batcher.hold(offered.usual_call());
    }
}

/// Turns the direct lane on or off (it is on by default) for this thread.
pub fn set_enabled(enabled: bool) {
    LANE.with(|lane| lane.borrow_mut().disabled = !enabled);
}

/// JavaScript opened lane number `lane` (`true`), or it closed (`false`: what it knew of the
/// server's clock goes, as another server may answer at that address when it opens again).
pub fn set_ready(lane: u32, ready: bool) {
    LANE.with(|lanes| {
        if let Some(state) = lanes.borrow_mut().lanes.get_mut(lane as usize) {
            state.ready = ready;
            state.clock = ServerClock::default();
        }
    });
}

/// What became of the call [`offer`] just saw (see [`Taken`]); `None` when it went the usual way
/// with nothing for JavaScript to do.
pub fn take() -> Option<Taken> {
    LANE.with(|lane| {
        let mut lane = lane.borrow_mut();
        if let Some(number) = lane.wanted.take() {
            let state = &lane.lanes[number as usize];
            let store = state.store.upgrade()?;
            return address(number, &store, &state.node).map(Taken::Open);
        }
        let mut direct = lane.offered.take()?;
        direct.sent_at = Some(Instant::now());
        let request = std::mem::take(&mut direct.bytes);
        let store = direct.batcher.store();
        store.count_batch(1);
        let taken = Taken::Call {
            lane: direct.lane,
            request,
            timeout_ms: store.config().command_timeout().as_secs_f64() * 1000.0,
        };
        lane.in_flight = Some(direct);
        Some(taken)
    })
}

fn address(lane: u32, store: &RedisStore, node: &Node) -> Option<LaneAddress> {
    let info = store.node_info(node)?;
    let (host, port, path) = match info.addr() {
        ConnectionAddr::Tcp(host, port) => (Some(host.clone()), Some(*port), None),
        ConnectionAddr::Unix(path) => (None, None, Some(path.display().to_string())),
        _ => return None,
    };
    let settings = info.redis_settings();
    let mut handshake = Vec::new();
    let mut replies = 0;
    if let Some(password) = settings.password() {
        let mut auth = redis::cmd("AUTH");
        if let Some(username) = settings.username() {
            auth.arg(username);
        }
        auth.arg(password);
        handshake.extend(auth.get_packed_command());
        replies += 1;
    }
    if settings.db() != 0 {
        handshake.extend(redis::cmd("SELECT").arg(settings.db()).get_packed_command());
        replies += 1;
    }
    Some(LaneAddress {
        lane,
        store: store.id(),
        host,
        port,
        path,
        handshake,
        replies,
        connect_timeout_ms: store.config().connect_timeout.as_secs_f64() * 1000.0,
    })
}

/// Reads the bytes that came for the lane's call: once its reply is complete, answers the call
/// (its `answered` runs here, on the JS thread) or passes it on. The calls made meanwhile then go
/// the usual way.
pub fn read(bytes: &[u8]) -> Read {
    let complete = LANE.with(|lane| {
        let mut lane = lane.borrow_mut();
        let direct = lane.in_flight.as_mut()?;
        direct.bytes.extend_from_slice(bytes);
        match frame_end(&direct.bytes, 0) {
            Ok(None) if direct.bytes.len() <= MAX_REPLY => Some(None),
            Ok(Some(end)) if end == direct.bytes.len() => Some(lane.in_flight.take()),
            _ => None,
        }
    });
    let direct = match complete {
        Some(Some(direct)) => direct,
        Some(None) => return Read::More,
        // No call on the lane, not a reply, or bytes after it.
        None => return Read::Confused,
    };
    let before = REPLIES.fetch_add(1, Ordering::AcqRel);
    let answered = match answer_of(&direct) {
        Some(mut outcome) => {
            let server_now = outcome.as_ref().ok().and_then(|answer| answer.server_now);
            learn_clock(&direct, server_now, before);
            if let (Some(estimate), Ok(answer)) = (direct.estimate, &mut outcome) {
                answer.server_now_lag = estimate.lag;
            }
            direct.batcher.store().count_call(&outcome);
            (direct.call.answered)(outcome);
            true
        }
        None => {
            // (Refused before running: the call is sent again, on the server's clock as read.)
            learn_clock(&direct, None, before);
            let batcher = direct.batcher.clone();
            batcher.send_now(direct.usual_call());
            false
        }
    };
    let released_calls = send_deferred();
    if answered {
        Read::Answered { released_calls }
    } else {
        Read::PassedOn
    }
}

/// The lane of `direct`, answered now (the [`REPLIES`] count `before` its reply), learns what
/// its reply tells of the server's clock.
fn learn_clock(direct: &Direct, server_now: Option<i64>, before: u64) {
    let answered_at = Instant::now();
    let sent_at = direct.sent_at.unwrap_or(answered_at);
    LANE.with(|lanes| {
        if let Some(state) = lanes.borrow_mut().lanes.get_mut(direct.lane as usize) {
            state.clock.learn(
                direct.estimate.is_some(),
                sent_at,
                answered_at,
                server_now,
                before,
            );
        }
    });
}

/// The call's answer from its complete reply, or `None` when Redis refused to run the script
/// (in place of the script's reply, or because the node is a replica now): the usual way then
/// deals with it.
fn answer_of(direct: &Direct) -> Option<Outcome<super::batch::Answer>> {
    let key = direct.first_key();
    let reply = match parse(&direct.bytes, &mut 0) {
        Ok(Some(reply)) => reply,
        Ok(None) => return None,
        Err(()) => return Some(Err(confused())),
    };
    let answers = direct.batcher.store().batch_answers(reply, 1, key);
    match answers.and_then(|mut answers| answers.pop().unwrap_or_else(|| Err(short_reply()))) {
        Err(failure)
            if failure
                .cause
                .as_ref()
                .is_some_and(|cause| cause.message.starts_with("READONLY ")) =>
        {
            None
        }
        outcome => Some(outcome),
    }
}

/// The lane's call failed: its connection was lost or confused (`lost` says how) or, with
/// `None`, it got no answer within `commandTimeoutMs`. It fails as it would on the runtime's
/// connection (the script may have run: it is not sent again).
pub fn fail(lost: Option<&str>) {
    let Some(direct) = LANE.with(|lane| lane.borrow_mut().in_flight.take()) else {
        return;
    };
    let store = direct.batcher.store();
    let key = direct.first_key();
    let outcome = Err(match lost {
        Some(reason) => store.lost_failure(key, reason),
        None => store.timeout_failure(),
    });
    store.count_call(&outcome);
    (direct.call.answered)(outcome);
    send_deferred();
}

/// Hands the calls made while the lane carried one to the usual way, in order.
fn send_deferred() -> bool {
    let deferred = LANE.with(|lane| std::mem::take(&mut lane.borrow_mut().deferred));
    let released = !deferred.is_empty();
    for (batcher, call) in deferred {
        batcher.hold(call);
    }
    released
}

/// Whether `bytes` begin with the `replies` replies of a lane's handshake: `Ok(Some(length))`
/// when all came and none is an error, `Ok(None)` while more must come, and the error Redis
/// answered (never echoing the password) otherwise.
pub fn handshake_done(bytes: &[u8], replies: u32) -> Outcome<Option<usize>> {
    let mut at = 0;
    for _ in 0..replies {
        let Some(end) = frame_end(bytes, at).map_err(|()| confused())? else {
            return Ok(None);
        };
        if let Ok(Value::ServerError(error)) = redis::parse_redis_value(&bytes[at..end]) {
            return Err(Failure::error(
                ErrorCode::StoreUnavailable,
                format!("Redis refused the direct lane's login: {error}"),
            ));
        }
        at = end;
    }
    Ok(Some(at))
}

fn confused() -> Failure {
    Failure::error(ErrorCode::StoreError, "Redis's reply could not be read")
}

/// The RESP value at `*at` (a complete one: see [`frame_end`]), `at` moved past it; `None` for
/// an error reply. (Simpler than redis-rs's parser, which a lone call's few numbers do not need.)
fn parse(bytes: &[u8], at: &mut usize) -> Result<Option<Value>, ()> {
    let kind = *bytes.get(*at).ok_or(())?;
    let line_end = bytes[*at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .ok_or(())?
        + *at;
    let line = std::str::from_utf8(&bytes[*at + 1..line_end]).map_err(|_| ())?;
    *at = line_end + 2;
    let number = || line.parse::<i64>().map_err(|_| ());
    Ok(Some(match kind {
        b'-' => return Ok(None),
        b'+' if line == "OK" => Value::Okay,
        b'+' => Value::SimpleString(line.to_owned()),
        b':' => Value::Int(number()?),
        b'$' => match number()? {
            -1 => Value::Nil,
            length => {
                let start = *at;
                let end = start + usize::try_from(length).map_err(|_| ())?;
                let value = bytes.get(start..end).ok_or(())?.to_vec();
                *at = end + 2;
                Value::BulkString(value)
            }
        },
        b'*' => match number()? {
            -1 => Value::Nil,
            count => {
                let mut items = Vec::with_capacity(usize::try_from(count).map_err(|_| ())?);
                for _ in 0..count {
                    // An error inside an array: not from our scripts (their calls' errors are
                    // strings).
                    items.push(parse(bytes, at)?.ok_or(())?);
                }
                Value::Array(items)
            }
        },
        _ => return Err(()),
    }))
}

/// Where the RESP value that starts at `at` ends: `Ok(None)` when `bytes` hold only part of it,
/// `Err` when they are not RESP.
fn frame_end(bytes: &[u8], at: usize) -> Result<Option<usize>, ()> {
    let Some(&kind) = bytes.get(at) else {
        return Ok(None);
    };
    let Some(line_end) = bytes[at..].windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = &bytes[at + 1..at + line_end];
    let after_line = at + line_end + 2;
    let length = || -> Result<i64, ()> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|text| text.parse().ok())
            .ok_or(())
    };
    match kind {
        b'+' | b'-' | b':' | b',' | b'#' | b'_' | b'(' => Ok(Some(after_line)),
        b'$' | b'!' | b'=' => match length()? {
            -1 => Ok(Some(after_line)),
            n if n >= 0 => {
                let end = after_line + n as usize + 2;
                Ok((bytes.len() >= end).then_some(end))
            }
            _ => Err(()),
        },
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = match length()? {
                -1 => return Ok(Some(after_line)),
                n if n >= 0 => n as usize,
                _ => return Err(()),
            };
            let items = if matches!(kind, b'%' | b'|') {
                2 * count
            } else {
                count
            };
            let mut end = after_line;
            for _ in 0..items {
                match frame_end(bytes, end)? {
                    Some(next) => end = next,
                    None => return Ok(None),
                }
            }
            Ok(Some(end))
        }
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_end, parse, ServerClock, CLOCK_SAMPLE_FOR, CLOCK_SAMPLE_ROUND_TRIP};
    use redis::Value;
    use std::time::{Duration, Instant};

    const US: Duration = Duration::from_micros(1);
    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_server_clock_is_estimated_from_a_quick_reply_never_ahead_of_it() {
        let t0 = Instant::now();
        let mut clock = ServerClock::default();
        assert_eq!(clock.estimate(t0, 0), None);
        // Written at t0, answered 40 µs later (the 7th reply of the process): the server read
        // 1,000,000,000 µs before the reply came.
        clock.learn(false, t0, t0 + 40 * US, Some(1_000_000_000), 6);
        let answered = t0 + 40 * US;
        assert_eq!(clock.estimate(answered, 7), Some((1_000_000_000, 42)));
        // 50 ms later: 50,000 µs less 50 for the drift allowed (1 µs per ms); behind the
        // server's clock by up to the round trip, twice the drift and 2 µs of rounding.
        assert_eq!(
            clock.estimate(answered + 50 * MS, 7),
            Some((1_000_049_950, 142))
        );
        assert_eq!(
            clock.estimate(answered + CLOCK_SAMPLE_FOR, 7),
            Some((1_000_099_900, 242))
        );
        // Too old: the clock is read again.
        assert_eq!(clock.estimate(answered + CLOCK_SAMPLE_FOR + US, 7), None);
        // Another reply came to this process since: its `now` may be later than the estimate.
        assert_eq!(clock.estimate(answered + MS, 8), None);
    }

    #[test]
    fn the_lanes_estimated_replies_keep_the_sample_and_any_other_reply_ends_or_renews_it() {
        let t0 = Instant::now();
        let mut clock = ServerClock::default();
        // A reply slower than CLOCK_SAMPLE_ROUND_TRIP.
        let slow = t0 + CLOCK_SAMPLE_ROUND_TRIP + US;
        clock.learn(false, t0, slow, Some(5_000_000), 0);
        assert_eq!(clock.estimate(slow, 1), None);
        clock.learn(false, t0, t0 + MS, Some(5_000_000), 1);
        assert_eq!(clock.estimate(t0 + 3 * MS, 2), Some((5_001_998, 1_006)));
        // The lane's next call carried the estimate (reply 3): the sample holds.
        clock.learn(true, t0 + 3 * MS, t0 + 4 * MS, Some(5_001_998), 2);
        assert_eq!(clock.estimate(t0 + 5 * MS, 3), Some((5_003_996, 1_010)));
        // A reply elsewhere came (4), then the lane's own (5): the sample is gone for good.
        clock.learn(false, t0 + 6 * MS, t0 + 7 * MS, None, 4);
        assert_eq!(clock.estimate(t0 + 8 * MS, 5), None);
        // A quick reply that read the clock brings a new sample; one that says nothing of the
        // clock (it may have read it) ends it.
        clock.learn(false, t0 + 8 * MS, t0 + 9 * MS, Some(8_000_000), 5);
        assert_eq!(clock.estimate(t0 + 9 * MS, 6), Some((8_000_000, 1_002)));
        clock.learn(false, t0 + 9 * MS, t0 + 9 * MS, None, 6);
        assert_eq!(clock.estimate(t0 + 9 * MS, 7), None);
        // A quick reply of a rolling window's script (no estimate: it read the clock) brings a
        // new sample; a slow one that read the clock ends it.
        let reply = (t0 + 9 * MS, t0 + 10 * MS, Some(9_000_000));
        clock.learn(false, reply.0, reply.1, reply.2, 7);
        assert_eq!(clock.estimate(t0 + 10 * MS, 8), Some((9_000_000, 1_002)));
        let slow = (t0 + 11 * MS, t0 + 13 * MS, Some(9_003_000));
        clock.learn(false, slow.0, slow.1, slow.2, 8);
        assert_eq!(clock.estimate(t0 + 13 * MS, 9), None);
    }

    #[test]
    fn a_reply_reads_as_redis_rs_reads_it() {
        let reply = b"*5\r\n:12\r\n$5\r\nhello\r\n*2\r\n$-1\r\n:-3\r\n+OK\r\n$0\r\n\r\n";
        let mut at = 0;
        let ours = parse(reply, &mut at).unwrap().unwrap();
        assert_eq!(at, reply.len());
        assert_eq!(ours, redis::parse_redis_value(reply).unwrap());
        assert_eq!(
            ours,
            Value::Array(vec![
                Value::Int(12),
                Value::BulkString(b"hello".to_vec()),
                Value::Array(vec![Value::Nil, Value::Int(-3)]),
                Value::Okay,
                Value::BulkString(Vec::new()),
            ])
        );
        assert_eq!(parse(b"-NOSCRIPT No matching script\r\n", &mut 0), Ok(None));
        assert_eq!(parse(b"*1\r\n-ERR x\r\n", &mut 0), Err(()));
    }

    #[test]
    fn a_reply_is_complete_only_with_all_its_bytes() {
        let reply = b"*3\r\n:1\r\n$5\r\nhello\r\n*2\r\n$-1\r\n-ERR x\r\n";
        for cut in 0..reply.len() {
            assert_eq!(frame_end(&reply[..cut], 0), Ok(None), "cut at {cut}");
        }
        assert_eq!(frame_end(reply, 0), Ok(Some(reply.len())));
        let mut two = reply.to_vec();
        two.extend(b"+OK\r\n");
        assert_eq!(frame_end(&two, 0), Ok(Some(reply.len())));
        assert_eq!(frame_end(&two, reply.len()), Ok(Some(two.len())));
    }

    #[test]
    fn bytes_that_are_not_resp_are_refused() {
        assert_eq!(frame_end(b"hello\r\n", 0), Err(()));
        assert_eq!(frame_end(b"$x\r\n", 0), Err(()));
        assert_eq!(frame_end(b"*-5\r\n", 0), Err(()));
    }
}
