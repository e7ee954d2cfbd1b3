//! One live assignment stream per worker session.
//!
//! Each assignment stream holds what it is about to send — up to a whole snapshot of its
//! session's feeds. A peer that opens stream after stream and reads none of them (an HTTP/2
//! receive window of zero) once grew the coordinator by a snapshot per stream, 2 GB for 90.
//! So a session has one live stream: a newer one supersedes the older, whose producer stops
//! and whose queued updates are dropped at once (not held until the connection closes),
//! and the older stream ends with `ABORTED` if its peer ever reads on.

use kairos_proto::v1 as pb;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};
use tokio_stream::Stream;
use tonic::Status;

/// Counter: assignment streams ended because a newer stream of the same session opened.
pub const ASSIGNMENT_STREAMS_SUPERSEDED_TOTAL: &str = "kairos_assignment_streams_superseded_total";

type Item = Result<pb::AssignmentUpdate, Status>;

/// The sessions' live streams.
#[derive(Default)]
pub struct LiveStreams {
    next: AtomicU64,
    live: Mutex<HashMap<String, (u64, oneshot::Sender<()>)>>,
}

/// A stream just opened: its producer's end, the signal that it was superseded, and the
/// stream to return to the peer.
pub struct Opened {
    /// Where the producer sends updates.
    pub tx: mpsc::Sender<Item>,
    /// Resolves when a newer stream of the session supersedes this one.
    pub superseded: oneshot::Receiver<()>,
    /// The producer calls this when it stops, whatever the reason.
    pub close: Closer,
    /// What the peer reads.
    pub outbox: Outbox,
}

/// Describes this module's metric (after the recorder is installed).
pub fn describe() {
    metrics::describe_counter!(
        ASSIGNMENT_STREAMS_SUPERSEDED_TOTAL,
        "Assignment streams ended because a newer stream of the same worker session opened."
    );
}

impl LiveStreams {
    /// Opens the stream of `session`, superseding the one it had.
    pub fn open(self: &Arc<Self>, session: &str, queue: usize) -> Opened {
        let (tx, rx) = mpsc::channel(queue);
        let (cancel, superseded) = oneshot::channel();
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let older = self
            .live
            .lock()
            .expect("stream lock")
            .insert(session.to_string(), (generation, cancel));
        if older.is_some() {
            // Dropping its sender is the signal.
            metrics::counter!(ASSIGNMENT_STREAMS_SUPERSEDED_TOTAL).increment(1);
            tracing::info!(worker = %session, "a newer assignment stream supersedes the older one");
        }
        let queue = Arc::new(Mutex::new(Some(rx)));
        Opened {
            tx,
            superseded,
            close: Closer {
                streams: self.clone(),
                session: session.to_string(),
                generation,
                queue: queue.clone(),
            },
            outbox: Outbox {
                queue,
                aborted: false,
            },
        }
    }

    /// How many sessions have a live stream.
    pub fn len(&self) -> usize {
        self.live.lock().expect("stream lock").len()
    }

    /// Whether no session has one.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Ends a stream's registration when its producer stops.
pub struct Closer {
    streams: Arc<LiveStreams>,
    session: String,
    generation: u64,
    queue: Arc<Mutex<Option<mpsc::Receiver<Item>>>>,
}

impl Closer {
    /// The producer stopped because a newer stream took over: drop what is queued.
    pub fn superseded(self) {
        self.queue.lock().expect("queue lock").take();
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        let mut live = self.streams.live.lock().expect("stream lock");
        if live.get(&self.session).map(|(g, _)| *g) == Some(self.generation) {
            live.remove(&self.session);
        }
    }
}

/// The peer's end of an assignment stream.
pub struct Outbox {
    queue: Arc<Mutex<Option<mpsc::Receiver<Item>>>>,
    aborted: bool,
}

impl Stream for Outbox {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        let polled = self
            .queue
            .lock()
            .expect("queue lock")
            .as_mut()
            .map(|rx| rx.poll_recv(cx));
        match polled {
            Some(p) => p,
            None if self.aborted => Poll::Ready(None),
            None => {
                self.aborted = true;
                Poll::Ready(Some(Err(Status::aborted(
                    "a newer assignment stream of this session superseded this one",
                ))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_stream::StreamExt;

    fn update(version: u64) -> Item {
        Ok(pb::AssignmentUpdate {
            epoch: 1,
            version,
            update: None,
            allowance: None,
        })
    }

    #[tokio::test]
    async fn a_newer_stream_supersedes_the_older_and_its_queue_is_dropped() {
        let streams = Arc::new(LiveStreams::default());
        let first = streams.open("w1", 4);
        first.tx.send(update(1)).await.unwrap();
        first.tx.send(update(2)).await.unwrap();
        assert_eq!(streams.len(), 1);

        let second = streams.open("w1", 4);
        // The older producer is told, and drops what its peer never read.
        first.superseded.await.unwrap_err();
        first.close.superseded();
        let mut old = first.outbox;
        let ended = old.next().await.unwrap().unwrap_err();
        assert_eq!(ended.code(), tonic::Code::Aborted);
        assert!(old.next().await.is_none());
        assert!(first.tx.send(update(3)).await.is_err(), "the queue is gone");

        // The newer one is the live one; another session is separate.
        second.tx.send(update(4)).await.unwrap();
        let mut new = second.outbox;
        assert_eq!(new.next().await.unwrap().unwrap().version, 4);
        let other = streams.open("w2", 4);
        assert_eq!(streams.len(), 2);
        drop(other.close);
        assert_eq!(streams.len(), 1);
        // The superseded one's close does not remove the newer registration.
        drop(second.close);
        assert!(streams.is_empty());
    }
}
