//! gRPC services of the coordinator: thin async wrappers over the registry, ingest and
//! (later) the planner, with one explicit mapping from domain errors to gRPC status codes.

pub mod admin;
pub mod ingest;
pub mod postings;
pub mod streams;
pub mod worker;

use crate::ingest::IngestError;
use crate::registry::RegistryError;
use crate::settings::SettingsError;
use tonic::Status;

/// Longest status message sent, in bytes. A message travels in a response header, and
/// one that quotes a caller's multi-megabyte id back would pass what clients accept (the
/// caller then sees a broken stream, not the refusal).
const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// `m`, cut at a character boundary to [`MAX_STATUS_MESSAGE_BYTES`] with its length noted.
fn status_text(mut m: String) -> String {
    let len = m.len();
    if kairos_proto::bounds::clip(&mut m, MAX_STATUS_MESSAGE_BYTES) {
        m.push_str(&format!("… ({len} bytes in all)"));
    }
    m
}

impl From<RegistryError> for Status {
    fn from(e: RegistryError) -> Status {
        match e {
            RegistryError::InvalidArgument(m) => Status::invalid_argument(status_text(m)),
            RegistryError::NotFound(m) => Status::not_found(status_text(m)),
            RegistryError::AlreadyExists(m) => Status::already_exists(status_text(m)),
            RegistryError::Store(s) => Status::unavailable(status_text(s.to_string())),
        }
    }
}

impl From<SettingsError> for Status {
    fn from(e: SettingsError) -> Status {
        match e {
            SettingsError::Invalid(m) => Status::invalid_argument(m),
            SettingsError::Unavailable(_) => Status::unavailable(e.to_string()),
        }
    }
}

impl From<IngestError> for Status {
    fn from(e: IngestError) -> Status {
        match e {
            IngestError::InvalidArgument(m) => Status::invalid_argument(status_text(m)),
            IngestError::Store(s) => Status::unavailable(s.to_string()),
        }
    }
}

/// Page sizes: 0 asks for the default, anything above the cap is capped.
pub(crate) fn page_limit(asked: u32) -> usize {
    match asked {
        0 => 100,
        n => (n as usize).min(1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_status_messages_are_cut_on_a_character_boundary() {
        let short = "feed `f1`".to_string();
        assert_eq!(status_text(short.clone()), short);
        let long = format!("feed `{}`", "é".repeat(3 << 20));
        let cut = status_text(long.clone());
        assert!(cut.len() < MAX_STATUS_MESSAGE_BYTES + 40, "{}", cut.len());
        assert!(
            cut.ends_with(&format!("({} bytes in all)", long.len())),
            "{cut}"
        );
        let s: Status = RegistryError::NotFound(long).into();
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert!(s.message().len() < MAX_STATUS_MESSAGE_BYTES + 40);
    }
}
