//! The bytes a session exchanges with its I/O layer: the frames it queued
//! to write ([`Outbox`]) and the bytes read but not yet decoded ([`Inbox`]).

use crate::wire::{self, Message, WireError};

/// Bytes waiting to be written to the control connection.
#[derive(Debug, Default)]
pub struct Outbox {
    buf: Vec<u8>,
}

impl Outbox {
    pub(crate) fn push(&mut self, msg: &Message) {
        wire::encode(msg, &mut self.buf);
    }

    /// Queues everything `other` holds after what is queued here.
    pub(crate) fn append(&mut self, mut other: Outbox) {
        self.buf.append(&mut other.buf);
    }

    /// Bytes queued as they are (another protocol's sessions on the same
    /// driver: iperf3's state bytes and length-prefixed JSON, in the
    /// `linerate-iperf3` crate, are not native frames).
    pub fn from_bytes(buf: Vec<u8>) -> Outbox {
        Outbox { buf }
    }

    /// The queue itself, for a session that writes its own framing.
    pub fn raw(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Takes everything queued so far (empty when nothing is pending).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// Accumulates received bytes and yields whole frames.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    buf: Vec<u8>,
}

impl Inbox {
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub(crate) fn next(&mut self) -> Result<Option<Message>, WireError> {
        match wire::decode(&self.buf)? {
            None => Ok(None),
            Some((msg, used)) => {
                self.buf.drain(..used);
                Ok(Some(msg))
            }
        }
    }
}
