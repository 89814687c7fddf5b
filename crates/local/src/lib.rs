//! Host-local transports and the message test that runs over them.
//!
//! A transport here is a sibling of the network engines: one small trait
//! ([`channel::Channel`]: send a whole message, receive one, send and
//! receive the 8-byte words that acknowledge it) with one implementation
//! per path between two processes on this host — TCP over loopback, Unix
//! domain stream and datagram sockets ([`sock`]), and shared memory
//! ([`shm`]: `direct` messages in ring slots, `bulk` payloads in a shared
//! region with a descriptor through the ring, over the SPSC [`ring`]).
//!
//! [`link`] creates both ends of every channel in one process and hands the
//! far ends to a child process (inherited descriptors: socket pairs, a
//! memfd — nothing with a name, so nothing stays behind when
//! either process dies). [`msg`] runs the message test's two sides over
//! them: the sender times each message until its acknowledgement, the
//! receiver checks the `--verify` [`pattern`] after acknowledging.

//!
//! Under `--cfg loom` (the ring's model check, see [`ring`]) the crate is
//! the ring alone: everything else needs real memory and processes.

#[cfg(not(loom))]
pub mod channel;
#[cfg(not(loom))]
pub mod error;
#[cfg(not(loom))]
pub mod link;
#[cfg(not(loom))]
pub mod msg;
#[cfg(not(loom))]
pub mod pattern;
pub mod ring;
#[cfg(not(loom))]
pub mod rr;
#[cfg(not(loom))]
pub mod shm;
#[cfg(not(loom))]
pub mod sock;
#[cfg(not(loom))]
pub mod transport;
#[cfg(not(loom))]
pub mod wait;

#[cfg(not(loom))]
pub use channel::Channel;
#[cfg(not(loom))]
pub use error::LocalError;
#[cfg(not(loom))]
pub use transport::Transport;
