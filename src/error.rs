//! Failures with stable codes.
//!
//! Every error ratekeeper raises carries a `code` that callers can match on, a JavaScript class
//! (`TypeError` for a value of the wrong type, `RangeError` for a value out of range, `Error` for
//! everything else) and, where another library failed underneath, that failure as `cause`.
//! This module is plain Rust; `crate::binding::js_error` turns a [`Failure`] into a JS error.

use std::fmt;

/// The stable `code` of an error, as JavaScript sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// An option is missing, of the wrong type or out of range.
    InvalidOption,
    /// An options object holds a key that no option has (usually a typo).
    UnknownOption,
    /// An id is not a non-empty string or a finite number, or is longer than 1 KiB.
    InvalidId,
    /// A call argument other than the id is wrong (`{ now }`, a callback, ...).
    InvalidArgument,
    /// Redis could not be reached, or did not answer within `commandTimeoutMs`.
    StoreUnavailable,
    /// The store was closed with `close()`.
    StoreClosed,
    /// Redis answered with an error (a key of the wrong type, a script error, ...).
    StoreError,
    /// The caller's own code (a getter, a Proxy trap) threw while an argument was read: the
    /// call stops, and that exception propagates as it is (this code is never seen then).
    Thrown,
    /// A bug in ratekeeper: please report it.
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidOption => "ERR_INVALID_OPTION",
            ErrorCode::UnknownOption => "ERR_UNKNOWN_OPTION",
            ErrorCode::InvalidId => "ERR_INVALID_ID",
            ErrorCode::InvalidArgument => "ERR_INVALID_ARGUMENT",
            ErrorCode::StoreUnavailable => "ERR_STORE_UNAVAILABLE",
            ErrorCode::StoreClosed => "ERR_STORE_CLOSED",
            ErrorCode::StoreError => "ERR_STORE_ERROR",
            ErrorCode::Thrown => "ERR_THROWN",
            ErrorCode::Internal => "ERR_INTERNAL",
        }
    }
}

/// Which JavaScript error class a failure becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Error,
    TypeError,
    RangeError,
}

/// The error that caused a [`Failure`]: another library's, kept for the `cause` property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// A short name of the kind of failure, e.g. `IoError` or `ResponseError`.
    pub code: String,
    pub message: String,
}

/// An error with a stable code, a JS class and an optional cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: ErrorClass,
    pub code: ErrorCode,
    pub message: String,
    pub cause: Option<Cause>,
}

impl Failure {
    pub fn type_error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::TypeError, code, message)
    }

    pub fn range_error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::RangeError, code, message)
    }

    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(ErrorClass::Error, code, message)
    }

    fn new(class: ErrorClass, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            class,
            code,
            message: message.into(),
            cause: None,
        }
    }

    pub fn with_cause(mut self, code: impl Into<String>, message: impl Into<String>) -> Self {
        self.cause = Some(Cause {
            code: code.into(),
            message: message.into(),
        });
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Failure {}

pub type Outcome<T> = Result<T, Failure>;
