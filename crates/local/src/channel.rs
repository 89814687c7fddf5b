//! The transport trait (the names of the transports: [`crate::transport`]).
use crate::error::LocalError;

/// One channel between two local processes, as either end sees it.
///
/// Messages are whole: `recv` returns exactly the bytes one `send` gave.
/// Words (8 bytes) carry acknowledgements and verdicts back.
pub trait Channel: Send {
    /// Sends one whole message.
    fn send(&mut self, msg: &[u8]) -> Result<(), LocalError>;
    /// Receives one whole message of `len` bytes.
    fn recv(&mut self, len: usize) -> Result<(), LocalError>;
    /// The last message received, `len` bytes, valid until the next
    /// `recv` (words sent meanwhile leave it alone). In bulk shared memory
    /// it is the shared region itself, which the peer does not write
    /// before this end's last word of the message.
    fn last(&self, len: usize) -> &[u8];
    fn send_word(&mut self, w: u64) -> Result<(), LocalError>;
    fn recv_word(&mut self) -> Result<u64, LocalError>;
    /// How this end's receives waited so far, where it spins before it
    /// sleeps (shared memory; Unix sockets with busy polling).
    fn wait_stats(&self) -> Option<crate::wait::WaitStats> {
        None
    }
}
