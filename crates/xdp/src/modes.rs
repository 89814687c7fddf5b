//! The AF_XDP modes a user may ask for: where the XDP program runs
//! ([`AttachMode`]) and whether the kernel copies frames ([`CopyMode`]).

use std::fmt;

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// In the driver, before an skb exists (the fast path).
    #[default]
    Native,
    /// After the kernel built an skb: works on any interface, slower.
    Generic,
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        })
    }
}

/// Whether the kernel copies frames between the driver and the UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CopyMode {
    /// The driver works in the UMEM directly (needs driver support).
    #[default]
    ZeroCopy,
    /// The kernel copies each frame (any interface).
    Copy,
}

impl fmt::Display for CopyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CopyMode::ZeroCopy => "zero-copy",
            CopyMode::Copy => "copy",
        })
    }
}
