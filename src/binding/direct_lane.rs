//! The direct lane's functions (`src/store/direct.rs`), for `lib/direct.js`: nothing else
//! should call them.

use napi::bindgen_prelude::{Buffer, BufferSlice, Either3, Float64ArraySlice, Uint8ArraySlice};
use napi::Env;
use napi_derive::napi;

use super::dispatch::answer_here;
use super::js_error;
use super::redis_store::JsRedisStore;
use crate::store::direct::{self, Read, Taken};

/// Where to open a direct lane (see `takeDirectCall`).
#[napi(object)]
pub struct DirectLaneAddress {
    /// The lane's number, by which `setDirectLaneReady` names it.
    pub lane: u32,
    /// The id of the store it belongs to (see `directLaneStore`).
    pub store: f64,
    /// The node's host and port, or its unix socket's path.
    pub host: Option<String>,
    pub port: Option<u32>,
    pub path: Option<String>,
    /// What to send first (`AUTH`, `SELECT`), and how many replies it gets.
    pub handshake: Buffer,
    pub replies: u32,
    pub connect_timeout_ms: f64,
}

/// After a lone call (nothing else of its caller pending) was made: its request when it goes by
/// a direct lane (the lane's number and the call's timeout in milliseconds then written into
/// `into`), as the number of its bytes written at the start of `scratch`, or as a Buffer of its
/// own when it is longer than `scratch`; the lane to open when it went the usual way for want of
/// one; `null` when neither. (`scratch` is the caller's to reuse once the call is answered: a
/// reply means Redis read the whole request. A Buffer made here per call would cost more than
/// the copy: V8 registers a finalizer for each.)
#[napi(catch_unwind)]
pub fn take_direct_call(
    mut into: Float64ArraySlice,
    mut scratch: Uint8ArraySlice,
) -> napi::Result<Option<Either3<u32, Buffer, DirectLaneAddress>>> {
    Ok(match direct::take() {
        None => None,
        Some(Taken::Call {
            lane,
            request,
            timeout_ms,
        }) => {
            // SAFETY: live typed arrays of the caller's, used only during this call.
            let (into, scratch) = unsafe { (into.as_mut(), scratch.as_mut()) };
            if into.len() < 2 {
                return Err(napi::Error::from_reason("`into` must hold 2 numbers"));
            }
            into[0] = f64::from(lane);
            into[1] = timeout_ms;
            match scratch.get_mut(..request.len()) {
                Some(start) => {
                    start.copy_from_slice(&request);
                    Some(Either3::A(request.len() as u32))
                }
                None => Some(Either3::B(request.into())),
            }
        }
        Some(Taken::Open(address)) => Some(Either3::C(DirectLaneAddress {
            lane: address.lane,
            store: address.store as f64,
            host: address.host,
            port: address.port.map(u32::from),
            path: address.path,
            handshake: address.handshake.into(),
            replies: address.replies,
            connect_timeout_ms: address.connect_timeout_ms,
        })),
    })
}

/// Reads bytes that came on the lane for its call: 0 when the reply is not complete yet, 1 when
/// the call was answered (`out` holds how many calls it answered, a union's several, then each
/// one's ticket and values), 2 when it was passed on to the usual way
/// (its answer comes through the answer channel), 3 when the bytes make no sense (close the
/// lane, then `failDirectCall`); plus 4 when calls made while the lane carried this one now wait
/// to be sent (`sendHeldCalls`: the only case, but for 2, where there is anything to send).
/// Throws the call's error when it failed.
#[napi(catch_unwind)]
pub fn read_direct_reply(
    env: Env,
    bytes: BufferSlice,
    mut out: Float64ArraySlice,
) -> napi::Result<u32> {
    let mut read = Read::More;
    // SAFETY: `out` is a live Float64Array of the caller's, used only during this call.
    let out = unsafe { out.as_mut() };
    let answer = answer_here(&env, || read = direct::read(&bytes), out);
    // Calls made while the lane carried this one wait to be sent (`sendHeldCalls`).
    let released = match read {
        Read::Answered {
            released_calls: true,
        } => RELEASED_CALLS,
        _ => 0,
    };
    match answer {
        Some(Ok(())) => Ok(1 | released),
        Some(Err(failure)) => Err(js_error(&env, failure)),
        None => Ok(match read {
            Read::More | Read::Answered { .. } => released,
            Read::PassedOn => 2,
            Read::Confused => 3,
        }),
    }
}

/// The bit of `readDirectReply`'s answer that says calls made meanwhile wait to be sent.
const RELEASED_CALLS: u32 = 4;

/// The lane's call failed: its connection was lost (`reason` says how) or, without a reason,
/// it got no answer in time. Throws the call's error (nothing when no call is on the lane).
#[napi(catch_unwind)]
pub fn fail_direct_call(env: Env, reason: Option<String>) -> napi::Result<()> {
    match answer_here(&env, || direct::fail(reason.as_deref()), &mut []) {
        Some(Err(failure)) => Err(js_error(&env, failure)),
        _ => Ok(()),
    }
}

/// Reads the replies to a lane's handshake: the bytes they took once all `replies` came, -1
/// while more must come; throws when Redis refused.
#[napi(catch_unwind)]
pub fn read_direct_handshake(env: Env, bytes: BufferSlice, replies: u32) -> napi::Result<f64> {
    match direct::handshake_done(&bytes, replies) {
        Ok(Some(length)) => Ok(length as f64),
        Ok(None) => Ok(-1.0),
        Err(failure) => Err(js_error(&env, failure)),
    }
}

/// Lane number `lane` is open and logged in (`true`), or closed (`false`).
#[napi(catch_unwind)]
pub fn set_direct_lane_ready(lane: u32, ready: bool) {
    direct::set_ready(lane, ready);
}

/// The id of `store`, as the lanes' addresses name it (`takeDirectCall`).
#[napi(catch_unwind)]
pub fn direct_lane_store(store: &JsRedisStore) -> f64 {
    store.inner.id() as f64
}

/// Turns the direct lanes on or off (on by default): tests of the usual way turn them off.
#[napi(catch_unwind)]
pub fn set_direct_lanes(enabled: bool) {
    direct::set_enabled(enabled);
}
