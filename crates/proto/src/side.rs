//! Which end of a test: the one word every other module of the protocol
//! (frames, spec, measurements) shares, kept apart so none of them has to
//! import another for it.

use serde::{Deserialize, Serialize};

/// Which side writes on a data connection (and which side measured what).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}
