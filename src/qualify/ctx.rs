//! What every qualification method's steps need: the run's configuration,
//! engine, preflight and stall count, in one context the methods share.

use super::trials::Stalls;
use crate::cli::{QualifyConfig, QualifyEngine};
use linerate_report::qualify::Preflight;

/// What every method's steps need.
pub struct Ctx<'a> {
    pub cfg: &'a QualifyConfig,
    pub t: &'a QualifyEngine,
    pub v6: bool,
    pub pre: &'a Preflight,
    /// Trials the tester's own stalls and drops spoilt (`trials::udp`).
    pub stalls: Stalls,
}
