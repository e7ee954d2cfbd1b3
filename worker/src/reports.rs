//! The worker's outgoing report buffer: bounded, sequenced, acknowledged, resent.
//!
//! Every report gets the next sequence number and stays buffered until the coordinator
//! acknowledges a sequence number at or past it, so nothing is dropped silently: a lost
//! stream is reopened and everything unacknowledged is sent again (ingest is idempotent),
//! and a full buffer refuses new reports — the caller stops starting fetches until acks
//! free room (back-pressure) instead of the buffer growing without bound.

use std::collections::VecDeque;

/// The buffer is full; the report was not taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("report buffer full ({0} unacknowledged reports)")]
pub struct Full(pub usize);

/// Unacknowledged reports in sequence order.
#[derive(Debug)]
pub struct ReportBuffer<T> {
    capacity: usize,
    next_seq: u64,
    pending: VecDeque<(u64, T)>,
    /// Position of the next report never sent on the current stream.
    unsent_from: u64,
}

impl<T: Clone> ReportBuffer<T> {
    /// A buffer holding at most `capacity` unacknowledged reports (at least 1).
    pub fn new(capacity: usize) -> Self {
        ReportBuffer {
            capacity: capacity.max(1),
            next_seq: 1,
            pending: VecDeque::new(),
            unsent_from: 1,
        }
    }

    /// Buffers a report and returns its sequence number, or refuses it when full.
    pub fn push(&mut self, report: T) -> Result<u64, Full> {
        if self.pending.len() >= self.capacity {
            return Err(Full(self.pending.len()));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push_back((seq, report));
        Ok(seq)
    }

    /// Reports not yet sent on the current stream, marking them sent.
    pub fn take_unsent(&mut self) -> Vec<(u64, T)> {
        let from = self.unsent_from;
        self.unsent_from = self.next_seq;
        self.pending
            .iter()
            .filter(|(s, _)| *s >= from)
            .cloned()
            .collect()
    }

    /// The coordinator made everything up to `seq` durable. Acks for sequence numbers never
    /// issued are ignored (a confused peer must not make us drop unsent reports).
    pub fn ack(&mut self, seq: u64) -> usize {
        if seq >= self.next_seq {
            return 0;
        }
        let before = self.pending.len();
        while self.pending.front().is_some_and(|(s, _)| *s <= seq) {
            self.pending.pop_front();
        }
        before - self.pending.len()
    }

    /// The report buffered under `seq`, while it is unacknowledged.
    pub fn get(&self, seq: u64) -> Option<&T> {
        // Sequence numbers are consecutive from the front's.
        let front = self.pending.front()?.0;
        let (s, r) = self.pending.get(seq.checked_sub(front)? as usize)?;
        (*s == seq).then_some(r)
    }

    /// The stream broke: everything unacknowledged must be sent again on the next one.
    pub fn reset_stream(&mut self) {
        self.unsent_from = self
            .pending
            .front()
            .map(|(s, _)| *s)
            .unwrap_or(self.next_seq);
    }

    /// Unacknowledged reports (the backlog metric).
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acked_reports_leave_unacked_ones_are_resent_and_a_full_buffer_pushes_back() {
        let mut b = ReportBuffer::new(3);
        assert_eq!(b.push("a"), Ok(1));
        assert_eq!(b.push("b"), Ok(2));
        assert_eq!(b.take_unsent(), vec![(1, "a"), (2, "b")]);
        assert_eq!(b.push("c"), Ok(3));
        assert_eq!(b.push("d"), Err(Full(3)), "back-pressure, not loss");
        assert_eq!(b.take_unsent(), vec![(3, "c")]);
        assert_eq!(
            (b.get(1), b.get(3), b.get(4)),
            (Some(&"a"), Some(&"c"), None)
        );
        assert_eq!(b.ack(99), 0, "acks beyond what was issued are ignored");
        assert_eq!(b.ack(1), 1);
        assert_eq!((b.get(1), b.get(2)), (None, Some(&"b")));
        // The stream breaks before 2 and 3 are acknowledged: both go again.
        b.reset_stream();
        assert_eq!(b.take_unsent(), vec![(2, "b"), (3, "c")]);
        assert_eq!(b.push("d"), Ok(4));
        assert_eq!(b.ack(3), 2);
        assert_eq!(b.backlog(), 1);
        assert_eq!(b.take_unsent(), vec![(4, "d")]);
        assert_eq!(b.ack(4), 1);
        assert_eq!(b.backlog(), 0);
    }
}
