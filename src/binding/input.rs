//! Per-call arguments: the id and the `{ now }` options.

use napi::bindgen_prelude::JsObjectValue;
use napi::bindgen_prelude::Unknown;
use napi::{JsValue, ValueType};

use super::options::{describe, read, string_value, OptionsReader};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::fixed_window::count_option;
use crate::time::{now_argument, Micros};

/// The longest id, in UTF-8 bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Reads an id that may be left out: `undefined` is `None`, the limiter's one shared, global
/// limit (only the callback API of the ClassDojo post offers that); anything else as [`id`].
pub fn optional_id(value: Unknown) -> Outcome<Option<String>> {
    if value.get_type().ok() == Some(ValueType::Undefined) {
        return Ok(None);
    }
    id(value).map(Some)
}

/// Reads an id: a non-empty string of at most 1 KiB, or a finite number, which counts as its
/// JavaScript string form (`1` and `"1"` are the same id, as in rolling-rate-limiter). A string
/// must be well-formed Unicode: a lone surrogate would become U+FFFD in UTF-8, so that
/// `'\uD800'` and `'\uDFFF'` would share a counter.
pub fn id(value: Unknown) -> Outcome<String> {
    let id = match value.get_type() {
        Ok(ValueType::String) => {
            let text = string_value(&value);
            // Only a string that shows U+FFFD needs the closer look (it may be a real one).
            if text.as_ref().is_some_and(|text| text.contains('\u{FFFD}')) {
                check_well_formed(&value)?;
            }
            text
        }
        Ok(ValueType::Number) => {
            let number = value.coerce_to_number().and_then(|n| n.get_double()).ok();
            if !number.is_some_and(f64::is_finite) {
                return Err(Failure::range_error(
                    ErrorCode::InvalidId,
                    "a numeric id must be finite (not NaN or Infinity)",
                ));
            }
            value
                .coerce_to_string()
                .ok()
                .and_then(|s| s.into_utf8().ok())
                .and_then(|s| s.into_owned().ok())
        }
        _ => {
            return Err(Failure::type_error(
                ErrorCode::InvalidId,
                format!(
                    "an id must be a non-empty string or a finite number, got {}",
                    describe(&value)
                ),
            ))
        }
    };
    let id =
        id.ok_or_else(|| Failure::type_error(ErrorCode::InvalidId, "the id could not be read"))?;
    check_id(&id)?;
    Ok(id)
}

fn check_well_formed(value: &Unknown) -> Outcome<()> {
    let utf16 = read(value.coerce_to_string().and_then(|s| s.into_utf16()))?;
    String::from_utf16(utf16.as_slice()).map(drop).map_err(|_| {
        Failure::range_error(
            ErrorCode::InvalidId,
            "an id must be well-formed Unicode: it holds a lone surrogate",
        )
    })
}

/// Checks the length of an id given as a string.
pub fn check_id(id: &str) -> Outcome<()> {
    if id.is_empty() {
        return Err(Failure::range_error(
            ErrorCode::InvalidId,
            "an id must not be empty",
        ));
    }
    if id.len() > MAX_ID_BYTES {
        return Err(Failure::range_error(
            ErrorCode::InvalidId,
            format!(
                "an id must be at most {MAX_ID_BYTES} bytes, got {}",
                id.len()
            ),
        ));
    }
    Ok(())
}

/// The most identifiers one call takes.
pub const MAX_IDS: usize = 16;

/// Reads the identifiers of a call: one id (see [`id`]) or an array of 1 to [`MAX_IDS`] ids,
/// judged together. Repeated ids count once.
pub fn ids(value: Unknown) -> Outcome<Vec<Option<String>>> {
    if !value.is_array().unwrap_or(false) {
        return Ok(vec![Some(id(value)?)]);
    }
    let not_ids = || {
        Failure::type_error(
            ErrorCode::InvalidId,
            format!("ids must be an id or an array of 1 to {MAX_IDS} ids"),
        )
    };
    let array = value.coerce_to_object().map_err(|_| not_ids())?;
    let length = read(array.get_array_length())? as usize;
    if length == 0 || length > MAX_IDS {
        return Err(Failure::range_error(
            ErrorCode::InvalidId,
            format!("an array of ids must hold 1 to {MAX_IDS} ids, got {length}"),
        ));
    }
    let mut ids = Vec::with_capacity(length);
    for i in 0..length as u32 {
        let item = read(array.get_element::<Unknown>(i))?;
        let id = id(item)?;
        if !ids.contains(&Some(id.clone())) {
            ids.push(Some(id));
        }
    }
    Ok(ids)
}

/// The options a call takes.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// The instant of the call, overriding the limiter's clock.
    pub now: Option<Micros>,
    /// What the call costs (1 unless the call takes `weight`).
    pub weight: u64,
    /// Metadata logged with the action (the sliding log's `{ meta }`).
    pub meta: Option<String>,
}

/// Which call options a call takes besides `now`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Now,
    Weight,
    WeightAndMeta,
}

/// Reads `{ now }` (milliseconds since the epoch, fractions allowed) and, as `takes` says,
/// `{ weight }` (a whole number from 1, default 1) and `{ meta }` (a string of at most 1 KiB).
pub fn call_options(value: Option<Unknown>, takes: Takes) -> Outcome<CallOptions> {
    let mut reader = OptionsReader::new(value, "call options", ErrorCode::InvalidArgument, true)?;
    let now = reader.number("now")?.map(now_argument).transpose()?;
    let weight = match takes {
        Takes::Now => None,
        _ => reader.number("weight")?.map(weight_argument).transpose()?,
    };
    let meta = match takes {
        Takes::WeightAndMeta => reader.string("meta")?,
        _ => None,
    };
    if meta.as_ref().is_some_and(|meta| meta.len() > MAX_ID_BYTES) {
        return Err(Failure::range_error(
            ErrorCode::InvalidArgument,
            format!("`meta` must be at most {MAX_ID_BYTES} bytes"),
        ));
    }
    reader.finish()?;
    Ok(CallOptions {
        now,
        weight: weight.unwrap_or(1),
        meta,
    })
}

/// The call options of the fast path (`src/binding/fast.rs`), where `NaN` stands for a number
/// not given: `None` when one needs the general path's checks (and error).
pub fn fast_call_options(weight: f64, now: f64) -> Option<CallOptions> {
    let weight = if weight.is_nan() {
        1
    } else {
        weight_argument(weight).ok()?
    };
    let now = if now.is_nan() {
        None
    } else {
        Some(now_argument(now).ok()?)
    };
    Some(CallOptions {
        now,
        weight,
        meta: None,
    })
}

fn weight_argument(weight: f64) -> Outcome<u64> {
    count_option("weight", weight, 1.0).map_err(|mut failure| {
        failure.code = ErrorCode::InvalidArgument;
        failure
    })
}
