//! Pre-shared-key authentication of the control connection (`--auth-key`):
//! an HMAC-SHA256 challenge–response in both directions, before the Hello.
//!
//! ```text
//!  client                                         server
//!    AuthInit{nc}                          ──▶
//!                                          ◀──  AuthChallenge{ns, HMAC(k, "server" ‖ nc ‖ ns)}
//!    (checks the server's proof)
//!    AuthProof{HMAC(k, "client" ‖ ns ‖ nc)} ──▶  (checks the client's proof)
//!    Hello …                               ──▶
//! ```
//!
//! Both nonces are fresh random bytes from each side's I/O layer, so a
//! recorded exchange proves nothing on a new connection (the other side's
//! nonce differs), and each side proves it holds the key before the other
//! acts. The key never crosses the wire; proofs are compared in constant
//! time (`Mac::verify_slice`). The labels keep a client proof from ever
//! being valid as a server proof. No I/O here: the sessions drive it.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 32;
/// Shortest key accepted (bytes of the key file, trailing newline removed).
pub const MIN_KEY_LEN: usize = 16;
/// Longest key file read: a key is a line of random text, so anything
/// longer is the wrong file (`/dev/zero` must not be read into memory).
pub const MAX_KEY_FILE_LEN: usize = 4096;
/// Below this estimate of a key's entropy the CLI warns that it is weak.
pub const WEAK_KEY_BITS: f64 = 64.0;

/// Why authentication failed; each names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the key is {0} bytes; at least {MIN_KEY_LEN} are needed")]
    KeyTooShort(usize),
    #[error("the key file is over {MAX_KEY_FILE_LEN} bytes: a key is one line of random text")]
    KeyFileTooLong,
    #[error("the server's proof does not match our key: it holds a different key (or is not the server it claims to be)")]
    ServerProof,
    #[error("the client's proof does not match this server's key")]
    ClientProof,
}

/// A pre-shared key. Its `Debug` shows no key material.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Vec<u8>);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuthKey({} bytes)", self.0.len())
    }
}

impl AuthKey {
    /// The key from a key file's contents: trailing whitespace (a final
    /// newline) is not part of it.
    pub fn from_file_contents(bytes: &[u8]) -> Result<Self, AuthError> {
        let end = bytes
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        if bytes.len() > MAX_KEY_FILE_LEN {
            return Err(AuthError::KeyFileTooLong);
        }
        if end < MIN_KEY_LEN {
            return Err(AuthError::KeyTooShort(end));
        }
        Ok(AuthKey(bytes[..end].to_vec()))
    }

    /// An upper estimate of the key's entropy in bits: its length times the
    /// Shannon entropy of its byte frequencies (Shannon 1948, eq. 4). A
    /// key of one repeated letter scores 0; 32 random bytes score ~160-256;
    /// `openssl rand -hex 32` scores ~250. Only for the weak-key warning:
    /// a high score does not make a guessable key strong.
    pub fn estimated_bits(&self) -> f64 {
        let mut counts = [0u32; 256];
        for &b in &self.0 {
            counts[usize::from(b)] += 1;
        }
        let n = self.0.len() as f64;
        let per_byte: f64 = counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = f64::from(c) / n;
                p * (1.0 / p).log2()
            })
            .sum();
        per_byte * n
    }

    fn mac(&self, label: &[u8], a: &[u8; NONCE_LEN], b: &[u8; NONCE_LEN]) -> Hmac<Sha256> {
        // HMAC accepts keys of any length; this cannot fail.
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        m.update(b"linerate auth v1 ");
        m.update(label);
        m.update(a);
        m.update(b);
        m
    }

    fn proof(&self, label: &[u8], a: &[u8; NONCE_LEN], b: &[u8; NONCE_LEN]) -> [u8; 32] {
        self.mac(label, a, b).finalize().into_bytes().into()
    }

    fn verify(&self, label: &[u8], a: &[u8; NONCE_LEN], b: &[u8; NONCE_LEN], proof: &[u8]) -> bool {
        self.mac(label, a, b).verify_slice(proof).is_ok()
    }
}

/// Client → server: starts authentication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthInit {
    pub nonce: [u8; NONCE_LEN],
}

/// Server → client: the server's nonce and its proof of the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthChallenge {
    pub nonce: [u8; NONCE_LEN],
    pub proof: [u8; 32],
}

/// Client → server: the client's proof of the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthProof {
    pub proof: [u8; 32],
}

/// The client's half.
#[derive(Debug, Clone)]
pub struct ClientAuth {
    key: AuthKey,
    nonce: [u8; NONCE_LEN],
}

impl ClientAuth {
    /// `nonce`: fresh random bytes for this connection.
    pub fn new(key: AuthKey, nonce: [u8; NONCE_LEN]) -> Self {
        ClientAuth { key, nonce }
    }

    pub fn init(&self) -> AuthInit {
        AuthInit { nonce: self.nonce }
    }

    /// Checks the server's proof; returns ours.
    pub fn on_challenge(&self, c: &AuthChallenge) -> Result<AuthProof, AuthError> {
        if !self.key.verify(b"server", &self.nonce, &c.nonce, &c.proof) {
            return Err(AuthError::ServerProof);
        }
        Ok(AuthProof {
            proof: self.key.proof(b"client", &c.nonce, &self.nonce),
        })
    }
}

/// The server's half, for one connection.
#[derive(Debug, Clone)]
pub struct ServerAuth {
    key: AuthKey,
    nonce: [u8; NONCE_LEN],
    client_nonce: Option<[u8; NONCE_LEN]>,
    verified: bool,
}

impl ServerAuth {
    /// `nonce`: fresh random bytes for this connection.
    pub fn new(key: AuthKey, nonce: [u8; NONCE_LEN]) -> Self {
        ServerAuth {
            key,
            nonce,
            client_nonce: None,
            verified: false,
        }
    }

    /// Whether a challenge was already sent on this connection.
    pub fn challenged(&self) -> bool {
        self.client_nonce.is_some()
    }

    pub fn on_init(&mut self, i: &AuthInit) -> AuthChallenge {
        self.client_nonce = Some(i.nonce);
        AuthChallenge {
            nonce: self.nonce,
            proof: self.key.proof(b"server", &i.nonce, &self.nonce),
        }
    }

    /// Checks the client's proof against this connection's challenge.
    pub fn on_proof(&mut self, p: &AuthProof) -> Result<(), AuthError> {
        let ok = self
            .client_nonce
            .is_some_and(|nc| self.key.verify(b"client", &self.nonce, &nc, &p.proof));
        self.verified = ok;
        ok.then_some(()).ok_or(AuthError::ClientProof)
    }

    pub fn verified(&self) -> bool {
        self.verified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> AuthKey {
        AuthKey::from_file_contents(s.as_bytes()).expect("key")
    }

    #[test]
    fn issue_28_key_files_past_the_cap_are_refused_and_weak_keys_score_low() {
        let long = vec![b'k'; MAX_KEY_FILE_LEN + 1];
        assert_eq!(
            AuthKey::from_file_contents(&long),
            Err(AuthError::KeyFileTooLong)
        );
        assert_eq!(key("aaaaaaaaaaaaaaaa").estimated_bits(), 0.0);
        assert!(key("abababababababab").estimated_bits() < WEAK_KEY_BITS);
        let hex = "3f9c0a7be41d5682c0ffee1234abcd9876543210fedcba0123456789abcdef01";
        assert!(key(hex).estimated_bits() > WEAK_KEY_BITS);
    }

    #[test]
    fn right_key_authenticates_both_ways() {
        let c = ClientAuth::new(key("correct horse battery staple\n"), [1; NONCE_LEN]);
        let mut s = ServerAuth::new(key("correct horse battery staple"), [2; NONCE_LEN]);
        let ch = s.on_init(&c.init());
        let p = c.on_challenge(&ch).expect("server proves the key");
        assert!(s.on_proof(&p).is_ok());
        assert!(s.verified());
    }

    #[test]
    fn issue_10_wrong_key_fails_on_both_sides() {
        let c = ClientAuth::new(key("correct horse battery staple"), [1; NONCE_LEN]);
        let mut s = ServerAuth::new(key("incorrect horse battery staple"), [2; NONCE_LEN]);
        let ch = s.on_init(&c.init());
        assert_eq!(c.on_challenge(&ch), Err(AuthError::ServerProof));
        // A client that skipped the check still cannot prove the key.
        let forged = AuthProof {
            proof: key("correct horse battery staple").proof(b"client", &ch.nonce, &[1; NONCE_LEN]),
        };
        assert_eq!(s.on_proof(&forged), Err(AuthError::ClientProof));
        assert!(!s.verified());
    }

    #[test]
    fn issue_10_a_replayed_proof_fails_on_a_new_connection() {
        let k = key("correct horse battery staple");
        let c = ClientAuth::new(k.clone(), [1; NONCE_LEN]);
        let mut first = ServerAuth::new(k.clone(), [2; NONCE_LEN]);
        let p = c.on_challenge(&first.on_init(&c.init())).expect("ok");
        assert!(first.on_proof(&p).is_ok());
        let mut second = ServerAuth::new(k.clone(), [3; NONCE_LEN]);
        let _ = second.on_init(&c.init());
        assert_eq!(second.on_proof(&p), Err(AuthError::ClientProof));
        // A recorded challenge is worthless to a client with a fresh nonce.
        let recorded = first.on_init(&c.init());
        let fresh = ClientAuth::new(k, [4; NONCE_LEN]);
        assert_eq!(fresh.on_challenge(&recorded), Err(AuthError::ServerProof));
        // A proof without a challenge is no proof.
        let mut third = ServerAuth::new(key("correct horse battery staple"), [5; NONCE_LEN]);
        assert!(third.on_proof(&p).is_err());
    }

    #[test]
    fn short_keys_are_refused_and_debug_hides_the_key() {
        assert_eq!(
            AuthKey::from_file_contents(b"short\n"),
            Err(AuthError::KeyTooShort(5))
        );
        let k = key("correct horse battery staple");
        assert_eq!(format!("{k:?}"), "AuthKey(28 bytes)");
    }
}
