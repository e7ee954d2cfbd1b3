//! Parts of a feed's state that most feeds leave at their default (fetch health, the
//! document's own description), held behind a pointer only once set.
//!
//! A `plan` over a million feeds holds every feed's state at once while it learns, and
//! the live coordinator holds them all the time: inline, these parts took 216 of a
//! state's 496 bytes and put it in the allocator's 512-byte class. Read, a [`Cold`] is its
//! value (the default when unset); written, it is boxed on first use, and
//! [`Cold::settle`] frees it again once it is back at its default. Stored and compared as
//! its value, so the stored state's bytes do not change.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::ops::{Deref, DerefMut};

/// A type with a shared default value to read an unset [`Cold`] as.
pub trait Empty: Default + PartialEq + 'static {
    /// The default value, shared.
    fn empty() -> &'static Self;
}

/// Implements [`Empty`] for a type whose shared empty value is its `Default`, made once.
macro_rules! empty_is_default {
    ($t:ty) => {
        impl $crate::control::cold::Empty for $t {
            fn empty() -> &'static Self {
                static EMPTY: std::sync::LazyLock<$t> = std::sync::LazyLock::new(<$t>::default);
                &EMPTY
            }
        }
    };
}
pub(crate) use empty_is_default;

/// A value boxed only when it differs from its default (see the module's doc).
pub struct Cold<T: Empty>(Option<Box<T>>);

impl<T: Empty> Cold<T> {
    /// Holds `value`, boxed unless it is the default.
    pub fn new(value: T) -> Self {
        let mut c = Cold(Some(Box::new(value)));
        c.settle();
        c
    }

    /// Frees the box once the value is back at its default; call after writing.
    pub fn settle(&mut self) {
        if self.0.as_deref().is_some_and(|v| v == T::empty()) {
            self.0 = None;
        }
    }

    /// Whether a box is held (for the tests of what a state costs).
    pub fn is_boxed(&self) -> bool {
        self.0.is_some()
    }
}

impl<T: Empty> Default for Cold<T> {
    fn default() -> Self {
        Cold(None)
    }
}

impl<T: Empty> From<T> for Cold<T> {
    fn from(value: T) -> Self {
        Cold::new(value)
    }
}

impl<T: Empty> Deref for Cold<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_deref().unwrap_or_else(|| T::empty())
    }
}

impl<T: Empty> DerefMut for Cold<T> {
    /// Boxes the default on first write: [`Cold::settle`] undoes it if nothing changed.
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T: Empty + Clone> Clone for Cold<T> {
    fn clone(&self) -> Self {
        Cold(self.0.clone())
    }
}

impl<T: Empty> PartialEq for Cold<T> {
    /// By value: an unset part equals a boxed default.
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Empty + std::fmt::Debug> std::fmt::Debug for Cold<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: Empty + Serialize> Serialize for Cold<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de, T: Empty + Deserialize<'de>> Deserialize<'de> for Cold<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Cold::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Part {
        n: u32,
        s: String,
    }

    empty_is_default!(Part);

    #[test]
    fn a_part_is_boxed_while_set_and_freed_when_back_at_its_default() {
        let mut c = Cold::<Part>::default();
        assert!(!c.is_boxed());
        assert_eq!(c.n, 0, "read unset: the default");
        c.n = 3;
        assert!(c.is_boxed());
        c.settle();
        assert!(c.is_boxed(), "set: kept");
        assert_eq!(c.n, 3);
        c.n = 0;
        c.settle();
        assert!(!c.is_boxed(), "back at the default: freed");
        assert!(!Cold::new(Part::default()).is_boxed());
        assert_eq!(Cold::<Part>::default(), Cold(Some(Box::default())));
    }

    #[test]
    fn a_part_is_stored_as_its_value() {
        let set = Cold::new(Part {
            n: 2,
            s: "x".into(),
        });
        let text = serde_json::to_string(&set).unwrap();
        assert_eq!(text, r#"{"n":2,"s":"x"}"#);
        let back: Cold<Part> = serde_json::from_str(&text).unwrap();
        assert_eq!(back, set);
        let unset: Cold<Part> = serde_json::from_str(r#"{"n":0,"s":""}"#).unwrap();
        assert!(!unset.is_boxed(), "a stored default is read back unboxed");
    }
}
