//! `linerate iperf3 -c …` ([`dropin`]): a test run over iperf3's protocol
//! by `linerate_run`'s iperf3 client, printed as iperf3 prints it: its
//! human layout ([`text_out`]) or its `-J` schema ([`json_out`]).

pub mod dropin;
pub mod json_out;
pub mod text_out;
