//! A request's id as the client wrote it (JSON-RPC 2.0 section 4: a string, a number or null),
//! echoed byte for byte in every answer. Kept as its JSON text, never as a number: serde_json
//! reads a number beyond 64 bits as a float, so `12345678901234567890123` would come back as
//! `1.2345678901234568e22` and the client could not match its answer.

use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A request's id: its JSON text, a string, a number or `null`.
#[derive(Clone)]
pub struct Id(Box<RawValue>);

impl Id {
    /// `null`: the id of an answer to a request whose id could not be read, or a notification.
    pub fn null() -> Id {
        Id(RawValue::from_string("null".into()).expect("null is JSON"))
    }

    /// The id `raw` (one JSON value, as it was read), when it is a string, a number or null.
    pub fn from_raw(raw: Box<RawValue>) -> Option<Id> {
        matches!(
            raw.get().as_bytes().first(),
            Some(b'"' | b'-' | b'0'..=b'9' | b'n')
        )
        .then_some(Id(raw))
    }

    /// The id's JSON text, as the client wrote it.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Whether the upstream gets the id as it is: a string, null, or an integer within 64-bit
    /// signed range (what every node reads: anvil refuses other numbers with -32600). Any other
    /// number goes as a string of its text ([`Id::for_upstream`]) and the answer gets the
    /// client's id back.
    pub fn sent_as_is(&self) -> bool {
        let text = self.get();
        !text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) || text.parse::<i64>().is_ok()
    }

    /// The id as it goes to the upstream: itself when [`Id::sent_as_is`], otherwise its text as a
    /// JSON string.
    pub fn for_upstream(&self) -> Cow<'_, str> {
        if self.sent_as_is() {
            Cow::Borrowed(self.get())
        } else {
            Cow::Owned(Value::String(self.get().into()).to_string())
        }
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// The id of a value the relay made (tests, its own requests); a value that is not a string,
/// a number or null is `null`.
impl From<Value> for Id {
    fn from(value: Value) -> Id {
        RawValue::from_string(value.to_string())
            .ok()
            .and_then(Id::from_raw)
            .unwrap_or_else(Id::null)
    }
}

/// As its JSON text (serde_json writes it unchanged).
impl serde::Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}
