//! Per-call arguments: the id and the `{ now }` options.

use napi::bindgen_prelude::Unknown;
use napi::{JsValue, ValueType};

use super::options::{describe, string_value, OptionsReader};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::time::{now_argument, Micros};

/// The longest id, in UTF-8 bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// Reads an id: a non-empty string of at most 1 KiB, or a finite number, which counts as its
/// JavaScript string form (`1` and `"1"` are the same id, as in rolling-rate-limiter).
/// `undefined` (no id) is `None`: the limiter's one shared, global limit.
pub fn id(value: Unknown) -> Outcome<Option<String>> {
    let id = match value.get_type() {
        Ok(ValueType::Undefined) => return Ok(None),
        Ok(ValueType::String) => string_value(&value),
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
                    "an id must be a string or a number, got {}",
                    describe(&value)
                ),
            ))
        }
    };
    let id =
        id.ok_or_else(|| Failure::type_error(ErrorCode::InvalidId, "the id could not be read"))?;
    check_id(&id)?;
    Ok(Some(id))
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

/// The options every call takes.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallOptions {
    /// The instant of the call, overriding the limiter's clock.
    pub now: Option<Micros>,
}

/// Reads `{ now }` (milliseconds since the epoch, fractions allowed).
pub fn call_options(value: Option<Unknown>) -> Outcome<CallOptions> {
    let mut reader = OptionsReader::new(value, "call options", ErrorCode::InvalidArgument, true)?;
    let now = reader.number("now")?.map(now_argument).transpose()?;
    reader.finish()?;
    Ok(CallOptions { now })
}
