//! Helpers for Kairos integration tests: locating the built binaries and the shared data.
