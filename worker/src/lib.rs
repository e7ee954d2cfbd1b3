//! Kairos worker library: the data plane's pieces, usable and testable on their own.
//!
//! * [`parse`] — feed documents (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, JSON Feed) to postings.

pub mod parse;
