//! The gRPC contract of Kairos, package `kairos.v1`: one service per file under
//! `proto/kairos/v1/`.
//!
//! * `WorkerControl` (`worker.proto`) — registration, the versioned assignment stream
//!   (snapshot then deltas), the acknowledged report stream, heartbeats;
//! * `Admin` (`admin.proto`) — feeds, users, subscriptions, OPML import, settings, plan
//!   inspection, stats, workers;
//! * `Ingest` (`ingest.proto`) — reader access events, batched and streamed;
//! * `Postings` (`postings.proto`) — new postings for a feed or a user since a cursor.
//!
//! [`v1::FILE_DESCRIPTOR_SET`] feeds gRPC server reflection; [`bounds`] states what one
//! report message may carry and splits a worker's reports to fit.

pub mod bounds;

/// Generated messages, clients and servers of `kairos.v1`.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("kairos.v1");

    /// Encoded descriptors of every `kairos.v1` file, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("kairos_descriptor");
}

/// The metric label of a fetch outcome (a closed set, shared by the worker's and the
/// coordinator's metrics so the two sides' series line up).
pub fn outcome_label(o: i32) -> &'static str {
    use v1::FetchOutcome as F;
    match F::try_from(o).unwrap_or(F::Unspecified) {
        F::Ok => "ok",
        F::NotModified => "not_modified",
        F::Malformed => "malformed",
        F::ClientError => "client_error",
        F::ServerError => "server_error",
        F::Throttled => "throttled",
        F::Timeout => "timeout",
        F::TooLarge => "too_large",
        F::RedirectLimit => "redirect_limit",
        F::ForbiddenTarget => "forbidden_target",
        F::NetworkError => "network_error",
        F::EmptyUnrecognized => "empty_unrecognized",
        F::Pushed => "pushed",
        F::Unspecified => "unspecified",
    }
}

#[cfg(test)]
mod tests {
    use super::v1;
    use prost::Message;

    #[test]
    fn messages_round_trip() {
        let update = v1::AssignmentUpdate {
            epoch: 3,
            version: 17,
            update: Some(v1::assignment_update::Update::Delta(v1::AssignmentDelta {
                upserts: vec![v1::FeedAssignment {
                    feed_id: "f1".into(),
                    url: "https://example.org/feed.xml".into(),
                    host: "example.org".into(),
                    fetch_offsets_seconds: vec![3600.0, 43200.0],
                    period_seconds: 86400.0,
                    recent_item_id_hashes: vec![1, u64::MAX],
                    ..Default::default()
                }],
                removed_feed_ids: vec!["f9".into()],
                more: true,
            })),
            allowance: Some(v1::DayAllowance {
                day: 20_000,
                fetches: 5_000,
                later_days: 4_800,
                counted: 1_234,
                per_minute: 40,
            }),
        };
        let bytes = update.encode_to_vec();
        assert_eq!(
            v1::AssignmentUpdate::decode(bytes.as_slice()).unwrap(),
            update
        );
        assert!(
            v1::AssignmentUpdate::decode(&b"\xff\xff\xff"[..]).is_err(),
            "garbage is an error"
        );
    }

    #[test]
    fn descriptor_set_names_the_four_services() {
        let text = String::from_utf8_lossy(v1::FILE_DESCRIPTOR_SET);
        for service in ["WorkerControl", "Admin", "Ingest", "Postings"] {
            assert!(
                text.contains(service),
                "{service} missing from the descriptor set"
            );
        }
    }

    /// Every rpc carries a comment right above it, as the contract's documentation.
    #[test]
    fn every_rpc_is_commented() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/kairos/v1");
        let mut rpcs = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            for (i, line) in lines.iter().enumerate() {
                if line.starts_with("rpc ") {
                    rpcs += 1;
                    assert!(
                        i > 0 && lines[i - 1].starts_with("//"),
                        "{}: `{line}` has no comment",
                        path.display()
                    );
                }
            }
        }
        assert!(rpcs >= 24, "found only {rpcs} rpcs");
    }
}
