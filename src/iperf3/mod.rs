//! The binary's side of iperf3 interoperation: serving real iperf3 clients
//! on the server's port ([`server`]), driving real iperf3 servers from
//! `linerate tcp|udp --iperf3` ([`client`]), and the conversions between
//! iperf3's parameters and results and linerate's spec and report model
//! ([`convert`]). `linerate iperf3 -c …` ([`dropin`]) prints a test as
//! iperf3 does: its human layout ([`text_out`]) or its `-J` schema
//! ([`json_out`]). The protocol itself is `linerate_proto::iperf3`.

pub mod client;
pub mod convert;
pub mod dropin;
pub mod json_out;
pub mod server;
pub mod text_out;
