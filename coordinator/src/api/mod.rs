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

impl From<RegistryError> for Status {
    fn from(e: RegistryError) -> Status {
        match e {
            RegistryError::InvalidArgument(m) => Status::invalid_argument(m),
            RegistryError::NotFound(m) => Status::not_found(m),
            RegistryError::AlreadyExists(m) => Status::already_exists(m),
            RegistryError::Store(s) => Status::unavailable(s.to_string()),
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
            IngestError::InvalidArgument(m) => Status::invalid_argument(m),
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
