//! linerate's results: one model, many renderers.
//!
//! [`model`] holds the serde types that are the JSON schema; [`build`] is the
//! only code that computes results from the two sides' measurements;
//! [`render`] turns the model into a human table, JSON, JSON Lines or CSV
//! (and a request/response test's histograms into CSV); [`plot`] and
//! [`plot_rr`] draw SVG figures from it; [`compare`] is `linerate compare`'s
//! model (one test per variant, ratios to the first) and renderers,
//! [`compare_plot`] its bar chart. Each chart kind is drawn by one
//! module (`chart_bars`, `chart_lines`) that every figure of that kind
//! calls. Nothing prints a number that is not in
//! the model.

pub mod build;
mod chart_bars;
mod chart_lines;
mod chart_style;
pub mod civil;
pub mod compare;
pub mod compare_plot;
pub mod html;
pub mod model;
pub mod msg;
pub mod msg_net;
pub mod msg_plot;
pub mod plot;
pub mod plot_extra;
pub mod plot_flows;
pub mod plot_rr;
mod plot_text;
pub mod qualify;
pub mod qualify_html;
pub mod render;
pub mod repeat;
mod rr;

pub use model::Report;
