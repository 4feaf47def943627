//! Reading a JS options object into checked Rust values.
//!
//! Each getter names the option in its error, checks the JS type (`TypeError`) and, for numbers,
//! that they are finite (`RangeError`); [`OptionsReader::finish`] then rejects keys that no getter
//! asked for, so a typo such as `maxInIntervall` is an error instead of a silently default limit.

use napi::bindgen_prelude::{JsObjectValue, Object, Unknown};
use napi::{JsValue, ValueType};

use crate::error::{ErrorCode, Failure, Outcome};

/// Reads the options object of `context` (e.g. "RateLimiter options"), one option at a time.
pub struct OptionsReader<'env> {
    object: Option<Object<'env>>,
    context: String,
    code: ErrorCode,
    known: Vec<&'static str>,
}

impl<'env> OptionsReader<'env> {
    /// `value` must be a plain object, or `undefined` when `optional` (every option then takes its
    /// default). Wrong values are reported with `code` (`ERR_INVALID_OPTION` for constructor
    /// options, `ERR_INVALID_ARGUMENT` for call options).
    pub fn new(
        value: Option<Unknown<'env>>,
        context: impl Into<String>,
        code: ErrorCode,
        optional: bool,
    ) -> Outcome<Self> {
        let context = context.into();
        let mut reader = Self {
            object: None,
            context,
            code,
            known: Vec::new(),
        };
        let value = value.filter(|v| v.get_type().ok() != Some(ValueType::Undefined));
        match value {
            None if optional => Ok(reader),
            None => Err(reader.not_an_object()),
            Some(v)
                if v.get_type().ok() == Some(ValueType::Object)
                    && !v.is_array().unwrap_or(true) =>
            {
                reader.object = Some(v.coerce_to_object().map_err(|_| reader.not_an_object())?);
                Ok(reader)
            }
            Some(_) => Err(reader.not_an_object()),
        }
    }

    fn not_an_object(&self) -> Failure {
        Failure::type_error(self.code, format!("{} must be an object", self.context))
    }

    /// The raw value of `name`, or `None` when it is absent or `undefined`.
    pub fn raw(&mut self, name: &'static str) -> Outcome<Option<Unknown<'env>>> {
        self.known.push(name);
        let Some(object) = self.object.as_ref() else {
            return Ok(None);
        };
        let value = read(object.get_named_property::<Unknown>(name))?;
        Ok((value.get_type().ok() != Some(ValueType::Undefined)).then_some(value))
    }

    pub fn number(&mut self, name: &'static str) -> Outcome<Option<f64>> {
        let Some(value) = self.raw(name)? else {
            return Ok(None);
        };
        if value.get_type().ok() != Some(ValueType::Number) {
            return Err(self.wrong_type(name, "a number", &value));
        }
        let number = value
            .coerce_to_number()
            .and_then(|n| n.get_double())
            .map_err(|_| self.wrong_type(name, "a number", &value))?;
        if !number.is_finite() {
            return Err(Failure::range_error(
                self.code,
                format!("`{name}` must be a finite number, got {number}"),
            ));
        }
        Ok(Some(number))
    }

    pub fn required_number(&mut self, name: &'static str) -> Outcome<f64> {
        self.number(name)?
            .ok_or_else(|| self.missing(name, "a number"))
    }

    pub fn boolean(&mut self, name: &'static str) -> Outcome<Option<bool>> {
        let Some(value) = self.raw(name)? else {
            return Ok(None);
        };
        if value.get_type().ok() != Some(ValueType::Boolean) {
            return Err(self.wrong_type(name, "a boolean", &value));
        }
        value
            .coerce_to_bool()
            .map(Some)
            .map_err(|_| self.wrong_type(name, "a boolean", &value))
    }

    pub fn string(&mut self, name: &'static str) -> Outcome<Option<String>> {
        let Some(value) = self.raw(name)? else {
            return Ok(None);
        };
        string_value(&value)
            .map(Some)
            .ok_or_else(|| self.wrong_type(name, "a string", &value))
    }

    /// A string from a fixed set of choices.
    pub fn choice(
        &mut self,
        name: &'static str,
        choices: &[&'static str],
    ) -> Outcome<Option<&'static str>> {
        let Some(given) = self.string(name)? else {
            return Ok(None);
        };
        choices
            .iter()
            .find(|&&c| c == given)
            .copied()
            .map(Some)
            .ok_or_else(|| {
                Failure::range_error(
                    self.code,
                    format!("`{name}` must be one of {}, got {given:?}", quoted(choices)),
                )
            })
    }

    /// An array of options objects, each read by `read_item` with its own reader (context
    /// `name[i]`).
    pub fn objects<T>(
        &mut self,
        name: &'static str,
        mut read_item: impl FnMut(&mut OptionsReader<'env>) -> Outcome<T>,
    ) -> Outcome<Option<Vec<T>>> {
        let Some(value) = self.raw(name)? else {
            return Ok(None);
        };
        if !value.is_array().unwrap_or(false) {
            return Err(self.wrong_type(name, "an array", &value));
        }
        let array = value
            .coerce_to_object()
            .map_err(|_| self.wrong_type(name, "an array", &value))?;
        let length = read(array.get_array_length())?;
        let mut items = Vec::with_capacity(length.min(64) as usize);
        for i in 0..length {
            let item = Some(read(array.get_element::<Unknown>(i))?);
            let mut reader = OptionsReader::new(item, format!("`{name}[{i}]`"), self.code, false)?;
            items.push(read_item(&mut reader)?);
            reader.finish()?;
        }
        Ok(Some(items))
    }

    /// An array of strings.
    pub fn strings(&mut self, name: &'static str) -> Outcome<Option<Vec<String>>> {
        let Some(value) = self.raw(name)? else {
            return Ok(None);
        };
        let not_strings = || self.wrong_type(name, "an array of strings", &value);
        if !value.is_array().unwrap_or(false) {
            return Err(not_strings());
        }
        let array = value.coerce_to_object().map_err(|_| not_strings())?;
        let length = read(array.get_array_length())?;
        (0..length)
            .map(|i| string_value(&read(array.get_element::<Unknown>(i))?).ok_or_else(not_strings))
            .collect::<Outcome<Vec<_>>>()
            .map(Some)
    }

    /// Fails on any key of the object that no getter asked for.
    pub fn finish(self) -> Outcome<()> {
        let Some(object) = &self.object else {
            return Ok(());
        };
        let names = read(object.get_property_names())?;
        for i in 0..read(names.get_array_length())? {
            let name = read(names.get_element::<String>(i))?;
            if !self.known.contains(&name.as_str()) {
                let mut known = self.known.clone();
                known.sort_unstable();
                return Err(Failure::type_error(
                    ErrorCode::UnknownOption,
                    format!(
                        "unknown option `{name}` in {}; the options are {}",
                        self.context,
                        quoted(&known)
                    ),
                ));
            }
        }
        Ok(())
    }

    pub fn missing(&self, name: &str, expected: &str) -> Failure {
        Failure::type_error(
            self.code,
            format!("`{name}` is required in {}: pass {expected}", self.context),
        )
    }

    pub fn wrong_type(&self, name: &str, expected: &str, value: &Unknown) -> Failure {
        Failure::type_error(
            self.code,
            format!("`{name}` must be {expected}, got {}", describe(value)),
        )
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }
}

/// The result of a read that may run the caller's own code (a getter, a Proxy trap): when that
/// code threw, the call stops with [`ErrorCode::Thrown`], and `crate::binding::js_error` hands
/// the very exception back.
pub fn read<T>(result: napi::Result<T>) -> Outcome<T> {
    result.map_err(|error| {
        Failure::type_error(
            ErrorCode::Thrown,
            format!("an argument could not be read: {}", error.reason),
        )
    })
}

/// The string held by a JS string value.
pub fn string_value(value: &Unknown) -> Option<String> {
    if value.get_type().ok()? != ValueType::String {
        return None;
    }
    value
        .coerce_to_string()
        .ok()?
        .into_utf8()
        .ok()?
        .into_owned()
        .ok()
}

/// A short description of a JS value's type, for error messages (never the value itself, which
/// could be a secret).
pub fn describe(value: &Unknown) -> &'static str {
    match value.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "a boolean",
        Ok(ValueType::Number) => "a number",
        Ok(ValueType::String) => "a string",
        Ok(ValueType::Symbol) => "a symbol",
        Ok(ValueType::BigInt) => "a bigint",
        Ok(ValueType::Function) => "a function",
        Ok(ValueType::Object) if value.is_array().unwrap_or(false) => "an array",
        Ok(ValueType::Object) => "an object",
        _ => "an unknown value",
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
