//! iperf3's JSON messages: the u32 big-endian length prefix, the client's
//! parameters and each side's results, read as untrusted input.
//!
//! Reading rules (why each exists):
//! - The length is checked before the body is buffered: parameters may be
//!   at most 8 KiB (iperf3 ≥3.18's cap), results at most [`MAX_RESULTS`];
//!   a zero length is an error (iperf3 rejects it too).
//! - Numbers are read as iperf3's cJSON reads them: any JSON number for any
//!   numeric key (`0` for a float, `1e3` for an integer), and an integer
//!   above `i64::MAX` reinterpreted as the two's-complement i64, because
//!   iperf3 3.12/3.13 print negative integers unsigned
//!   (−1 → `18446744073709551615`).
//! - A key of the wrong type is an error naming the key, never silently
//!   read as something else; unknown keys are ignored (every iperf3 does).
//! - Flags: a boolean flag is on when it is `true`, an integer flag when it
//!   is a non-zero number. Real clients send only `true` and `1` and omit
//!   flags that are off; other values (`false`, `0`) are taken as off and
//!   noted, because iperf3 servers up to 3.17 would count any presence as on.
//!
//! Writing: every numeric field that is integral is written as an integer,
//! −1 as `-1`, and a non-finite float as 0 (serde would write `null`, which
//! iperf3 ≥3.18 rejects).

use serde_json::{Map, Number, Value};

use crate::control::{Direction, Iperf3Error, MAX_STREAMS};

/// Largest parameters message (iperf3 ≥3.18 refuses longer ones).
pub const MAX_PARAMS: usize = 8192;
/// Largest results message linerate reads. iperf3 sets none; results carry
/// one small object per stream (at most 256) and, from a server asked for
/// its output, that output — 4 MiB is far above both.
pub const MAX_RESULTS: usize = 4 * 1024 * 1024;
/// Largest results message a server reads from an iperf3 client: a
/// client sends no output, only its streams (at most 256 objects of about
/// 200 bytes, 50 KiB in all), so 256 KiB leaves room to spare while a
/// hostile client's message costs little memory to parse (a 4 MiB one took
/// the server's peak RSS to 146 MB, issue 28).
pub const MAX_CLIENT_RESULTS: usize = 256 * 1024;

/// Takes one length-prefixed JSON message from the front of `buf` if it is
/// complete. Errors as soon as the prefix shows a length of 0 or above
/// `max`, before the body is waited for.
pub fn take_message(buf: &mut Vec<u8>, max: usize) -> Result<Option<Vec<u8>>, Iperf3Error> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    if len == 0 {
        return Err(Iperf3Error::Empty);
    }
    if len as u64 > max as u64 {
        return Err(Iperf3Error::TooLong {
            len: len.into(),
            max,
        });
    }
    let end = 4 + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let body = buf[4..end].to_vec();
    buf.drain(..end);
    Ok(Some(body))
}

/// Appends `value` as a length-prefixed compact JSON message.
pub fn put_message(value: &Value, out: &mut Vec<u8>) {
    let text = value.to_string();
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// Parses a message body into its object, every string in it sanitised
/// as the native codec does ([`linerate_proto::sanitize`]): nothing past here holds
/// a peer's raw control characters (a `client_version` with CR/LF would
/// forge a server log line). `server_output_text` keeps its newlines: it
/// is the server's report, printed as lines.
fn parse_object(body: &[u8]) -> Result<Map<String, Value>, Iperf3Error> {
    let mut m = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(Iperf3Error::Json("not a JSON object".into())),
        Err(e) => return Err(Iperf3Error::Json(e.to_string())),
    };
    if linerate_proto::sanitize::json_may_need(body) {
        for (k, v) in m.iter_mut() {
            match v {
                Value::String(s) if k == "server_output_text" => {
                    if let std::borrow::Cow::Owned(clean) =
                        linerate_proto::sanitize::sanitize_lines(s)
                    {
                        *s = clean;
                    }
                }
                v => linerate_proto::sanitize::sanitize_json(v),
            }
        }
    }
    Ok(m)
}

fn type_error(key: &str, want: &str, got: &Value) -> Iperf3Error {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    Iperf3Error::Field(format!("{key}: expected {want}, got {kind}"))
}

/// A JSON number as iperf3 reads an integer: i64 as is; above `i64::MAX`,
/// the two's-complement value (3.12's unsigned negatives); a float
/// truncated toward zero if it fits.
pub fn lenient_int(n: &Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    if let Some(u) = n.as_u64() {
        return Some(u as i64);
    }
    let f = n.as_f64()?;
    // -2^63 .. 2^63 exclusive of the top: `as` saturates, so check first.
    (-9.223_372_036_854_776e18..9.223_372_036_854_776e18)
        .contains(&f)
        .then_some(f.trunc() as i64)
}

fn int(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, Iperf3Error> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => lenient_int(n)
            .map(Some)
            .ok_or_else(|| Iperf3Error::Field(format!("{key}: number {n} out of range"))),
        Some(v) => Err(type_error(key, "a number", v)),
    }
}

fn float(m: &Map<String, Value>, key: &str) -> Result<Option<f64>, Iperf3Error> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64().filter(|f| f.is_finite())),
        Some(v) => Err(type_error(key, "a number", v)),
    }
}

fn string(m: &Map<String, Value>, key: &str) -> Result<Option<String>, Iperf3Error> {
    match m.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(type_error(key, "a string", v)),
    }
}

fn required<T>(v: Option<T>, key: &str) -> Result<T, Iperf3Error> {
    v.ok_or_else(|| Iperf3Error::Field(format!("missing required key {key}")))
}

/// Writes a float as iperf3 does: integral values as integers, non-finite as 0.
fn num(f: f64) -> Value {
    if !f.is_finite() {
        return Value::from(0);
    }
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        return Value::from(f as i64);
    }
    Number::from_f64(f).map_or(Value::from(0), Value::Number)
}

/// Transport of the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

/// The client's test parameters, as iperf3 sends them (units as on the
/// wire: seconds, bytes, bits per second).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub protocol: Protocol,
    pub omit: u32,
    pub time: u32,
    /// Bytes to move (sum over streams); 0: unset.
    pub num: u64,
    /// Blocks to move; 0: unset.
    pub blockcount: u64,
    pub mss: Option<u32>,
    pub nodelay: bool,
    pub parallel: u32,
    pub direction: Direction,
    pub window: Option<u32>,
    /// Read/write size (TCP) or exact datagram size (UDP).
    pub len: u32,
    /// Per-stream pacing target, bits/s; 0: unlimited.
    pub bandwidth: u64,
    pub burst: Option<u32>,
    pub fqrate: Option<u64>,
    pub pacing_timer: Option<u64>,
    pub tos: Option<u8>,
    pub flowlabel: Option<u32>,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    pub congestion: Option<String>,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub repeating_payload: bool,
    pub zerocopy: bool,
    pub dont_fragment: bool,
    pub skip_rx_copy: bool,
    pub server_affinity: Option<u32>,
    pub client_version: Option<String>,
    /// Options a linerate server cannot honour, by iperf3 option name
    /// (`--sctp`, `-m`, `-L`, authentication): the server refuses them.
    pub unsupported: Vec<&'static str>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            protocol: Protocol::Tcp,
            omit: 0,
            time: 10,
            num: 0,
            blockcount: 0,
            mss: None,
            nodelay: false,
            parallel: 1,
            direction: Direction::Normal,
            window: None,
            len: 128 * 1024,
            bandwidth: 0,
            burst: None,
            fqrate: None,
            pacing_timer: Some(1000),
            tos: None,
            flowlabel: None,
            title: None,
            extra_data: None,
            congestion: None,
            get_server_output: false,
            udp_counters_64bit: false,
            repeating_payload: false,
            zerocopy: false,
            dont_fragment: false,
            skip_rx_copy: false,
            server_affinity: None,
            client_version: None,
            unsupported: Vec::new(),
        }
    }
}

/// Why a parameters message was refused, with the iperf3 error code to send.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}")]
pub struct ParamsError {
    pub code: i32,
    pub error: Iperf3Error,
}

fn bad(code: i32, error: Iperf3Error) -> ParamsError {
    ParamsError { code, error }
}

/// Parameters and what was odd about them (values real clients never send).
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedParams {
    pub params: Params,
    pub notes: Vec<String>,
}

fn flag_bool(m: &Map<String, Value>, key: &str, notes: &mut Vec<String>) -> bool {
    match m.get(key) {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(v) => {
            notes.push(format!(
                "parameter {key}={v} taken as off (iperf3 clients send only true)"
            ));
            false
        }
    }
}

fn flag_int(m: &Map<String, Value>, key: &str, notes: &mut Vec<String>) -> bool {
    match m.get(key) {
        None => false,
        Some(Value::Number(n)) if lenient_int(n).is_some_and(|v| v != 0) => true,
        Some(v) => {
            notes.push(format!(
                "parameter {key}={v} taken as off (iperf3 clients send only 1)"
            ));
            false
        }
    }
}

/// Reads and range-checks a parameters message body (the ranges of
/// iperf3's current source; each failure carries the code iperf3 sends).
pub fn parse_params(body: &[u8]) -> Result<ParsedParams, ParamsError> {
    use crate::control::code;
    let recv = |e| bad(code::RECV_PARAMS, e);
    let m = parse_object(body).map_err(recv)?;
    let mut notes = Vec::new();
    let mut p = Params::default();
    let tcp = flag_bool(&m, "tcp", &mut notes);
    let udp = flag_bool(&m, "udp", &mut notes);
    if flag_bool(&m, "sctp", &mut notes) {
        p.unsupported.push("--sctp");
    }
    if tcp && udp {
        return Err(recv(Iperf3Error::Field("both tcp and udp are set".into())));
    }
    p.protocol = if udp { Protocol::Udp } else { Protocol::Tcp };
    // A wrong type is a bad message (114); a value out of range gets the
    // code iperf3 gives that parameter.
    let range = |key: &str, lo: i64, hi: i64, c: i32| match int(&m, key).map_err(recv)? {
        Some(v) if v < lo || v > hi => Err(bad(
            c,
            Iperf3Error::Field(format!("{key}: {v} is outside {lo}..={hi}")),
        )),
        v => Ok(v),
    };
    if let Some(v) = range("omit", 0, 600, code::OMIT)? {
        p.omit = v as u32;
    }
    if let Some(v) = range("time", 0, 86_400, code::DURATION)? {
        p.time = v as u32;
    }
    p.num = range("num", 0, i64::MAX, code::RECV_PARAMS)?.unwrap_or(0) as u64;
    p.blockcount = range("blockcount", 0, i64::MAX, code::RECV_PARAMS)?.unwrap_or(0) as u64;
    p.mss = range("MSS", 0, 32_767, code::MSS)?
        .filter(|&v| v > 0)
        .map(|v| v as u32);
    p.nodelay = flag_bool(&m, "nodelay", &mut notes);
    if let Some(v) = range("parallel", 1, MAX_STREAMS.into(), code::NUM_STREAMS)? {
        p.parallel = v as u32;
    }
    let reverse = flag_bool(&m, "reverse", &mut notes);
    let bidir = flag_bool(&m, "bidirectional", &mut notes);
    p.direction = match (reverse, bidir) {
        (true, true) => {
            return Err(bad(
                code::REVERSE_BIDIR,
                Iperf3Error::Field("both reverse and bidirectional are set".into()),
            ))
        }
        (true, false) => Direction::Reverse,
        (false, true) => Direction::Bidir,
        (false, false) => Direction::Normal,
    };
    if flag_bool(&m, "mptcp", &mut notes) {
        p.unsupported.push("-m/--mptcp");
    }
    p.window = range("window", 0, 512 * 1024 * 1024, code::BUF_SIZE)?
        .filter(|&v| v > 0)
        .map(|v| v as u32);
    if p.protocol == Protocol::Udp {
        p.len = 1460;
    }
    match (p.protocol, int(&m, "len").map_err(recv)?) {
        (_, None) => {}
        (Protocol::Tcp, Some(v)) if (1..=1024 * 1024).contains(&v) => p.len = v as u32,
        (Protocol::Udp, Some(v)) if (16..=65_507).contains(&v) => p.len = v as u32,
        (Protocol::Tcp, Some(v)) => {
            return Err(bad(
                code::BLOCK_SIZE,
                Iperf3Error::Field(format!("len: {v} is outside 1..=1048576 for TCP")),
            ))
        }
        (Protocol::Udp, Some(v)) => {
            return Err(bad(
                code::UDP_BLOCK_SIZE,
                Iperf3Error::Field(format!("len: {v} is outside 16..=65507 for UDP")),
            ))
        }
    }
    p.bandwidth = range("bandwidth", 0, i64::MAX, code::RECV_PARAMS)?.unwrap_or(0) as u64;
    p.fqrate = range("fqrate", 0, i64::MAX, code::RECV_PARAMS)?
        .filter(|&v| v > 0)
        .map(|v| v as u64);
    p.pacing_timer = range("pacing_timer", 0, i64::MAX, code::RECV_PARAMS)?.map(|v| v as u64);
    p.burst = range("burst", 0, 1000, code::BURST)?
        .filter(|&v| v > 0)
        .map(|v| v as u32);
    p.tos = range("TOS", 0, 255, code::BAD_TOS)?
        .filter(|&v| v > 0)
        .map(|v| v as u8);
    p.flowlabel = range("flowlabel", 0, 0xF_FFFF, code::RECV_PARAMS)?
        .filter(|&v| v > 0)
        .map(|v| v as u32);
    if p.flowlabel.is_some() {
        p.unsupported.push("-L/--flowlabel");
    }
    p.server_affinity = range("server_affinity", 0, 1024, code::RECV_PARAMS)?.map(|v| v as u32);
    let text = |key: &str| string(&m, key).map_err(recv);
    p.title = text("title")?;
    p.extra_data = text("extra_data")?;
    p.congestion = text("congestion")?;
    p.client_version = text("client_version")?;
    if text("authtoken")?.is_some() {
        p.unsupported
            .push("--username/--rsa-public-key-path (authentication)");
    }
    p.get_server_output = flag_int(&m, "get_server_output", &mut notes);
    p.udp_counters_64bit = flag_int(&m, "udp_counters_64bit", &mut notes);
    p.repeating_payload = flag_int(&m, "repeating_payload", &mut notes);
    p.zerocopy = flag_int(&m, "zerocopy", &mut notes);
    p.dont_fragment = flag_int(&m, "dont_fragment", &mut notes);
    p.skip_rx_copy = flag_int(&m, "skip_rx_copy", &mut notes);
    Ok(ParsedParams { params: p, notes })
}

/// The parameters message a client sends: the key set and JSON types of
/// iperf3 3.12 (flags that are off are left out, never sent as `false`).
pub fn params_json(p: &Params) -> Value {
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_owned(), v);
    };
    match p.protocol {
        Protocol::Tcp => put("tcp", true.into()),
        Protocol::Udp => put("udp", true.into()),
    }
    put("omit", p.omit.into());
    if let Some(a) = p.server_affinity {
        put("server_affinity", a.into());
    }
    put("time", p.time.into());
    put("num", p.num.into());
    put("blockcount", p.blockcount.into());
    if let Some(v) = p.mss {
        put("MSS", v.into());
    }
    if p.nodelay {
        put("nodelay", true.into());
    }
    put("parallel", p.parallel.into());
    match p.direction {
        Direction::Reverse => put("reverse", true.into()),
        Direction::Bidir => put("bidirectional", true.into()),
        Direction::Normal => {}
    }
    if let Some(v) = p.window {
        put("window", v.into());
    }
    put("len", p.len.into());
    if p.bandwidth > 0 {
        put("bandwidth", p.bandwidth.into());
    }
    if let Some(v) = p.fqrate {
        put("fqrate", v.into());
    }
    put("pacing_timer", p.pacing_timer.unwrap_or(1000).into());
    if let Some(v) = p.burst {
        put("burst", v.into());
    }
    if let Some(v) = p.tos {
        put("TOS", v.into());
    }
    for (k, v) in [
        ("title", &p.title),
        ("extra_data", &p.extra_data),
        ("congestion", &p.congestion),
    ] {
        if let Some(v) = v {
            put(k, v.clone().into());
        }
    }
    for (k, on) in [
        ("get_server_output", p.get_server_output),
        ("udp_counters_64bit", p.udp_counters_64bit),
        ("repeating_payload", p.repeating_payload),
        ("zerocopy", p.zerocopy),
        ("dont_fragment", p.dont_fragment),
        ("skip_rx_copy", p.skip_rx_copy),
    ] {
        if on {
            put(k, 1.into());
        }
    }
    put(
        "client_version",
        p.client_version
            .clone()
            .unwrap_or_else(|| "3.12".into())
            .into(),
    );
    Value::Object(m)
}

/// One stream's entry in a results message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResults {
    pub id: u32,
    /// Bytes sent (sender) or received (receiver) after the omit period.
    pub bytes: u64,
    /// −1 when not known (receivers, no `TCP_INFO`).
    pub retransmits: i64,
    /// Seconds.
    pub jitter: f64,
    pub errors: i64,
    pub omitted_errors: Option<i64>,
    pub packets: i64,
    pub omitted_packets: Option<i64>,
    pub start_time: f64,
    pub end_time: f64,
}

/// One side's results message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// −1: this side only received; 1: TCP sender with retransmit counts.
    pub sender_has_retransmits: i64,
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResults>,
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
}

fn parse_stream(v: &Value) -> Result<StreamResults, Iperf3Error> {
    let Value::Object(m) = v else {
        return Err(type_error("streams[]", "an object", v));
    };
    let id = required(int(m, "id")?, "id")?;
    let id = u32::try_from(id)
        .ok()
        .filter(|&i| i > 0)
        .ok_or(Iperf3Error::UnknownStream(id))?;
    let bytes = required(int(m, "bytes")?, "bytes")?;
    let bytes = u64::try_from(bytes)
        .map_err(|_| Iperf3Error::Field(format!("bytes: negative ({bytes})")))?;
    let omitted_errors = int(m, "omitted_errors")?;
    let omitted_packets = int(m, "omitted_packets")?;
    if omitted_errors.is_some() != omitted_packets.is_some() {
        return Err(Iperf3Error::Field(
            "omitted_errors and omitted_packets must come together".into(),
        ));
    }
    Ok(StreamResults {
        id,
        bytes,
        retransmits: required(int(m, "retransmits")?, "retransmits")?,
        jitter: required(float(m, "jitter")?, "jitter")?,
        errors: required(int(m, "errors")?, "errors")?,
        omitted_errors,
        packets: required(int(m, "packets")?, "packets")?,
        omitted_packets,
        start_time: float(m, "start_time")?.unwrap_or(0.0),
        end_time: float(m, "end_time")?.unwrap_or(0.0),
    })
}

/// Reads a results message body.
pub fn parse_results(body: &[u8]) -> Result<Results, Iperf3Error> {
    let m = parse_object(body)?;
    let streams = match m.get("streams") {
        Some(Value::Array(a)) if a.len() > 2 * MAX_STREAMS as usize => {
            return Err(Iperf3Error::Field(format!(
                "streams: {} entries, more than a test can have",
                a.len()
            )))
        }
        Some(Value::Array(a)) => a.iter().map(parse_stream).collect::<Result<_, _>>()?,
        Some(v) => return Err(type_error("streams", "an array", v)),
        None => return Err(Iperf3Error::Field("missing required key streams".into())),
    };
    let server_output_json = match m.get("server_output_json") {
        None => None,
        Some(v @ Value::Object(_)) => Some(v.clone()),
        Some(v) => return Err(type_error("server_output_json", "an object", v)),
    };
    Ok(Results {
        cpu_util_total: required(float(&m, "cpu_util_total")?, "cpu_util_total")?,
        cpu_util_user: required(float(&m, "cpu_util_user")?, "cpu_util_user")?,
        cpu_util_system: required(float(&m, "cpu_util_system")?, "cpu_util_system")?,
        sender_has_retransmits: required(
            int(&m, "sender_has_retransmits")?,
            "sender_has_retransmits",
        )?,
        congestion_used: string(&m, "congestion_used")?,
        streams,
        server_output_text: string(&m, "server_output_text")?,
        server_output_json,
    })
}

/// Writes a results message (every key iperf3 readers require, both
/// `omitted_*` keys, −1 as `-1`).
pub fn results_json(r: &Results) -> Value {
    let streams: Vec<Value> = r
        .streams
        .iter()
        .map(|s| {
            serde_json::json!({
                "id": s.id,
                "bytes": s.bytes,
                "retransmits": s.retransmits,
                "jitter": num(s.jitter),
                "errors": s.errors,
                "omitted_errors": s.omitted_errors.unwrap_or(0),
                "packets": s.packets,
                "omitted_packets": s.omitted_packets.unwrap_or(0),
                "start_time": num(s.start_time),
                "end_time": num(s.end_time),
            })
        })
        .collect();
    let mut m = Map::new();
    m.insert("cpu_util_total".into(), num(r.cpu_util_total));
    m.insert("cpu_util_user".into(), num(r.cpu_util_user));
    m.insert("cpu_util_system".into(), num(r.cpu_util_system));
    m.insert(
        "sender_has_retransmits".into(),
        r.sender_has_retransmits.into(),
    );
    if let Some(c) = &r.congestion_used {
        m.insert("congestion_used".into(), c.clone().into());
    }
    m.insert("streams".into(), Value::Array(streams));
    if let Some(t) = &r.server_output_text {
        m.insert("server_output_text".into(), t.clone().into());
    }
    if let Some(j) = &r.server_output_json {
        m.insert("server_output_json".into(), j.clone());
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::code;
    use proptest::prelude::*;

    fn framed(text: &str) -> Vec<u8> {
        let mut v = (text.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(text.as_bytes());
        v
    }

    #[test]
    fn framing_waits_for_the_whole_message_across_reads() {
        let whole = framed(r#"{"tcp":true}"#);
        let mut buf = Vec::new();
        for (i, b) in whole.iter().enumerate() {
            buf.push(*b);
            let got = take_message(&mut buf, MAX_PARAMS).expect("valid");
            if i + 1 < whole.len() {
                assert!(
                    got.is_none(),
                    "complete after {} of {} bytes",
                    i + 1,
                    whole.len()
                );
            } else {
                assert_eq!(got.as_deref(), Some(&br#"{"tcp":true}"#[..]));
            }
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn framing_leaves_following_bytes() {
        let mut buf = framed("{}");
        buf.push(0x0E);
        assert_eq!(
            take_message(&mut buf, 10).expect("ok").as_deref(),
            Some(&b"{}"[..])
        );
        assert_eq!(buf, vec![0x0E]);
    }

    #[test]
    fn framing_refuses_oversized_and_zero_lengths_from_the_prefix() {
        // 8193 bytes announced: refused with only the prefix in hand.
        let mut buf = 8193u32.to_be_bytes().to_vec();
        assert_eq!(
            take_message(&mut buf, MAX_PARAMS),
            Err(Iperf3Error::TooLong {
                len: 8193,
                max: 8192
            })
        );
        let mut buf = 8192u32.to_be_bytes().to_vec();
        assert_eq!(take_message(&mut buf, MAX_PARAMS), Ok(None));
        let mut buf = vec![0, 0, 0, 0];
        assert_eq!(take_message(&mut buf, MAX_PARAMS), Err(Iperf3Error::Empty));
        let mut buf = vec![0xFF; 4];
        assert!(matches!(
            take_message(&mut buf, MAX_RESULTS),
            Err(Iperf3Error::TooLong { .. })
        ));
    }

    #[test]
    fn debian_312_parameters_parse() {
        let p = parse_params(br#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#).expect("valid");
        assert!(p.notes.is_empty());
        let p = p.params;
        assert_eq!(
            (p.protocol, p.time, p.parallel, p.len),
            (Protocol::Tcp, 2, 2, 131072)
        );
        assert_eq!(p.direction, Direction::Normal);
        assert_eq!(p.client_version.as_deref(), Some("3.12"));

        let p = parse_params(br#"{"udp":true,"omit":1,"time":0,"num":10485760,"blockcount":0,"parallel":1,"reverse":true,"len":1400,"bandwidth":1000000,"pacing_timer":1000,"burst":5,"TOS":16,"udp_counters_64bit":1,"get_server_output":1,"repeating_payload":1,"client_version":"3.12"}"#).expect("valid").params;
        assert_eq!(p.protocol, Protocol::Udp);
        assert_eq!(p.direction, Direction::Reverse);
        assert_eq!(
            (p.num, p.len, p.bandwidth, p.burst, p.tos),
            (10485760, 1400, 1_000_000, Some(5), Some(16))
        );
        assert!(p.udp_counters_64bit && p.get_server_output && p.repeating_payload);
    }

    #[test]
    fn parameters_take_any_number_and_ignore_unknown_keys() {
        let p = parse_params(br#"{"tcp":true,"time":2.0,"parallel":4e0,"len":1.31072e5,"num":1e3,"future_key":[1,2],"gso":0}"#).expect("valid").params;
        assert_eq!((p.time, p.parallel, p.len, p.num), (2, 4, 131072, 1000));
        // Absent keys keep iperf3's server defaults.
        let p = parse_params(b"{}").expect("valid").params;
        assert_eq!(
            (p.protocol, p.time, p.parallel, p.len),
            (Protocol::Tcp, 10, 1, 131072)
        );
    }

    #[test]
    fn flags_other_than_true_or_nonzero_are_off_and_noted() {
        let p = parse_params(
            br#"{"tcp":true,"reverse":false,"get_server_output":0,"udp_counters_64bit":1}"#,
        )
        .expect("valid");
        assert_eq!(p.params.direction, Direction::Normal);
        assert!(!p.params.get_server_output && p.params.udp_counters_64bit);
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].contains("reverse"));
    }

    #[test]
    fn parameter_errors_carry_iperf3_codes() {
        let e = |s: &str| parse_params(s.as_bytes()).expect_err(s).code;
        assert_eq!(e(r#"{"parallel":200}"#), code::NUM_STREAMS);
        assert_eq!(e(r#"{"parallel":0}"#), code::NUM_STREAMS);
        assert_eq!(e(r#"{"time":86401}"#), code::DURATION);
        assert_eq!(e(r#"{"omit":601}"#), code::OMIT);
        assert_eq!(e(r#"{"udp":true,"len":15}"#), code::UDP_BLOCK_SIZE);
        assert_eq!(e(r#"{"udp":true,"len":65508}"#), code::UDP_BLOCK_SIZE);
        assert_eq!(e(r#"{"tcp":true,"len":1048577}"#), code::BLOCK_SIZE);
        assert_eq!(e(r#"{"window":536870913}"#), code::BUF_SIZE);
        assert_eq!(e(r#"{"TOS":256}"#), code::BAD_TOS);
        assert_eq!(e(r#"{"burst":1001}"#), code::BURST);
        assert_eq!(
            e(r#"{"reverse":true,"bidirectional":true}"#),
            code::REVERSE_BIDIR
        );
        assert_eq!(e(r#"{"parallel":"2"}"#), code::RECV_PARAMS);
        assert_eq!(e(r#"{"title":3}"#), code::RECV_PARAMS);
        assert_eq!(e(r#"[1]"#), code::RECV_PARAMS);
        assert_eq!(e(r#"{"tcp":true"#), code::RECV_PARAMS);
        let msg = parse_params(br#"{"parallel":"2"}"#)
            .expect_err("type")
            .to_string();
        assert_eq!(msg, "parallel: expected a number, got a string");
    }

    #[test]
    fn unsupported_options_are_named() {
        let p = parse_params(br#"{"sctp":true,"flowlabel":5,"authtoken":"abc"}"#)
            .expect("parses")
            .params;
        assert_eq!(p.unsupported.len(), 3, "{:?}", p.unsupported);
    }

    #[test]
    fn params_round_trip_through_the_writer() {
        let p = Params {
            protocol: Protocol::Udp,
            time: 3,
            parallel: 2,
            direction: Direction::Bidir,
            len: 1400,
            bandwidth: 10_000_000,
            udp_counters_64bit: true,
            get_server_output: true,
            window: Some(1 << 20),
            title: Some("t".into()),
            client_version: Some("3.12".into()),
            ..Params::default()
        };
        let v = params_json(&p);
        assert_eq!(v["udp"], true);
        assert_eq!(v["bidirectional"], true);
        assert!(v.get("reverse").is_none() && v.get("tcp").is_none());
        assert_eq!(v["udp_counters_64bit"], 1);
        let back = parse_params(v.to_string().as_bytes()).expect("valid");
        assert!(back.notes.is_empty());
        assert_eq!(back.params, p);
    }

    const CLIENT_312: &str = r#"{"cpu_util_total":12.57,"cpu_util_user":0.5,"cpu_util_system":12.07,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":543948800,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.000069},{"id":3,"bytes":1e3,"retransmits":0,"jitter":2.0922511015999367e-05,"errors":18446744073709551614,"packets":5,"start_time":0,"end_time":2}]}"#;

    #[test]
    fn issue_28_peer_strings_are_sanitised_at_decode() {
        let p = parse_params(
            br#"{"tcp":true,"time":1,"parallel":1,"len":1024,"client_version":"3.1\r\nlinerate server: forged\u001b[2J"}"#,
        )
        .expect("valid")
        .params;
        let v = p.client_version.expect("version");
        assert!(
            !v.contains('\n') && !v.contains('\r') && !v.contains('\u{1b}'),
            "{v}"
        );
        assert!(
            v.contains("\\u{d}\\u{a}linerate server: forged\\u{1b}[2J"),
            "{v}"
        );
        let r = parse_results(br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[],"congestion_used":"bbr\u0007","server_output_text":"line 1\n\u001b]0;owned\u0007line 2\n","server_output_json":{"x":"\u001b[31m"}}"#)
            .expect("valid");
        assert_eq!(r.congestion_used.as_deref(), Some("bbr\\u{7}"));
        assert_eq!(
            r.server_output_text.as_deref(),
            Some("line 1\n\\u{1b}]0;owned\\u{7}line 2\n")
        );
        assert_eq!(r.server_output_json.expect("json")["x"], "\\u{1b}[31m");
    }

    #[test]
    fn results_parse_iperf3_312_quirks() {
        let r = parse_results(CLIENT_312.as_bytes()).expect("valid");
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
        assert_eq!(r.streams.len(), 2);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].jitter, 0.0);
        assert_eq!(r.streams[1].bytes, 1000);
        assert_eq!(r.streams[1].errors, -2);
        assert!((r.streams[1].jitter - 2.0922511015999367e-05).abs() < 1e-18);
        assert_eq!(r.streams[1].end_time, 2.0);
        assert_eq!(r.streams[0].omitted_errors, None);
    }

    #[test]
    fn results_tolerate_missing_optional_keys_and_refuse_missing_required() {
        let r = parse_results(br#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"extra":"x"}],"new_key":{}}"#).expect("valid");
        assert_eq!(r.streams[0].end_time, 0.0);
        assert!(r.congestion_used.is_none());
        for bad in [
            r#"{"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":{}}"#,
            r#"{"cpu_util_total":"1","cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0}]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":-5,"retransmits":-1,"jitter":0,"errors":0,"packets":0}]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"omitted_errors":0}]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":0,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0}]}"#,
            r#"{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{"id":1e20,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0}]}"#,
        ] {
            assert!(parse_results(bad.as_bytes()).is_err(), "accepted {bad}");
        }
    }

    #[test]
    fn results_writer_prints_integers_and_minus_one() {
        let r = Results {
            cpu_util_total: 2.0,
            cpu_util_user: f64::NAN,
            cpu_util_system: 0.25,
            sender_has_retransmits: -1,
            congestion_used: None,
            streams: vec![StreamResults {
                id: 3,
                bytes: 10,
                retransmits: -1,
                jitter: 0.0,
                errors: 0,
                omitted_errors: None,
                packets: 7,
                omitted_packets: Some(2),
                start_time: 0.0,
                end_time: 2.5,
            }],
            server_output_text: Some("hello\n".into()),
            server_output_json: None,
        };
        let text = results_json(&r).to_string();
        assert!(text.contains(r#""cpu_util_total":2,"#), "{text}");
        assert!(text.contains(r#""cpu_util_user":0,"#), "{text}");
        assert!(text.contains(r#""sender_has_retransmits":-1"#), "{text}");
        assert!(
            text.contains(r#""retransmits":-1"#) && text.contains(r#""jitter":0,"#),
            "{text}"
        );
        assert!(text.contains(r#""omitted_errors":0"#), "{text}");
        let back = parse_results(text.as_bytes()).expect("valid");
        assert_eq!(back.streams[0].omitted_packets, Some(2));
        assert_eq!(back.server_output_text.as_deref(), Some("hello\n"));
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_params(&bytes);
            let _ = parse_results(&bytes);
            let mut buf = bytes.clone();
            let _ = take_message(&mut buf, MAX_PARAMS);
        }

        #[test]
        fn json_shaped_inputs_never_panic(
            key in prop_oneof![Just("parallel"), Just("len"), Just("time"), Just("window"), Just("bytes"), Just("id"), Just("streams"), Just("jitter"), Just("reverse")],
            val in prop_oneof![
                any::<i64>().prop_map(|v| v.to_string()),
                any::<u64>().prop_map(|v| v.to_string()),
                any::<f64>().prop_map(|v| format!("{v:e}")),
                Just("null".to_string()), Just("true".to_string()), Just("\"x\"".to_string()),
                Just("[]".to_string()), Just("{}".to_string()), Just("1e400".to_string()), Just("-1e400".to_string()),
            ],
        ) {
            let text = format!("{{\"{key}\":{val}}}");
            let _ = parse_params(text.as_bytes());
            let stream = format!(r#"{{"cpu_util_total":1,"cpu_util_user":0,"cpu_util_system":1,"sender_has_retransmits":0,"streams":[{{"id":1,"bytes":5,"retransmits":-1,"jitter":0,"errors":0,"packets":0,"{key}":{val}}}]}}"#);
            let _ = parse_results(stream.as_bytes());
        }
    }
}
