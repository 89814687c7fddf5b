//! The Ethernet II header (no VLAN tag, no FCS: the NIC adds and strips it).

use super::error::PacketError;
use super::fields::Mac;

pub const ETH_HEADER_LEN: usize = 14;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;

/// A checked view of an Ethernet frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// The view, once `buffer` holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, PacketError> {
        let have = buffer.as_ref().len();
        if have < ETH_HEADER_LEN {
            return Err(PacketError::Truncated {
                have,
                need: ETH_HEADER_LEN,
            });
        }
        Ok(EthernetFrame { buffer })
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn dst(&self) -> Mac {
        mac(&self.b()[0..6])
    }

    pub fn src(&self) -> Mac {
        mac(&self.b()[6..12])
    }

    pub fn ethertype(&self) -> u16 {
        u16::from_be_bytes([self.b()[12], self.b()[13]])
    }

    pub fn payload(&self) -> &[u8] {
        &self.b()[ETH_HEADER_LEN..]
    }
}

fn mac(b: &[u8]) -> Mac {
    let mut m = [0; 6];
    m.copy_from_slice(b);
    m
}

impl<'a> EthernetFrame<&'a [u8]> {
    /// The payload, borrowed from the buffer rather than from the view.
    pub fn into_payload(self) -> &'a [u8] {
        let range = ETH_HEADER_LEN..;
        &self.buffer[range]
    }
}

/// Writes the header at the start of `frame` (at least 14 bytes).
pub(super) fn emit(frame: &mut [u8], dst: Mac, src: Mac, ethertype: u16) {
    frame[0..6].copy_from_slice(&dst);
    frame[6..12].copy_from_slice(&src);
    frame[12..14].copy_from_slice(&ethertype.to_be_bytes());
}
