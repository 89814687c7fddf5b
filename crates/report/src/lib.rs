//! linerate's results: one model, many renderers.
//!
//! [`model`] holds the serde types that are the JSON schema; [`build`] is the
//! only code that computes results from the two sides' measurements;
//! [`render`] turns the model into a human table, JSON, JSON Lines or CSV;
//! [`plot`] draws SVG figures from it. Nothing prints a number that is not
//! in the model.

pub mod build;
pub mod model;
pub mod plot;
pub mod render;

pub use model::Report;
