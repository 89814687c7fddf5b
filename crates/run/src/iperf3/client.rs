//! `linerate tcp|udp HOST --iperf3`: linerate's own tests against a real
//! iperf3 server, speaking iperf3's protocol ([`Iperf3ClientSession`], run
//! by the one control driver, `control::drive`) and reported in
//! linerate's model and formats.
//!
//! The streams run on the ordinary runner (TCP with the chosen engine, UDP
//! in iperf3's datagram format with 64-bit counters). As in iperf3, the
//! client decides the end: at `omit + time` (or once its senders have sent
//! `--bytes`) it stops its senders and sends TEST_END; when the server asks
//! for the results (its senders stopped) it ends its receivers, which so
//! count everything the server sent, collects its side's results and sends
//! them; the server's results come back in iperf3's terms and become the
//! server side of the report. `linerate iperf3 -c` runs here too
//! ([`run`] with an [`Output`] that also gets the [`Connection`]).

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::error::{fail, no_randomness, Context as _, Result, RunError};
use linerate_engine::runner::{DataSocket, SideRun, StreamSetup};
use linerate_engine::{socket, udp};
use linerate_iperf3::client::{ClientAction, ClientOutcome, Iperf3ClientSession};
use linerate_iperf3::json::{Protocol as IProtocol, Results};
use linerate_iperf3::output::{Connection, StreamAddrs};
use linerate_iperf3::udp as iudp;
use linerate_iperf3::{
    client_role, Cookie, Direction as IDirection, Iperf3Error, Role, COOKIE_LEN,
};
use linerate_proto::measure;
use linerate_proto::wire::Side;
use linerate_report::build;
use linerate_report::model::{IntervalRecord, TestInfo};
use linerate_report::render::Sink;
use linerate_report::Report;

use crate::about::{software, system_info};
use crate::client::{closed_output, write_unless_closed};
use crate::config::{ClientConfig, Iperf3Extras as Extras, Iperf3Family as Family, Target};
use crate::control::{self, ControlConn, ControlSide};
use crate::iperf3::convert::{self as conv, linerate_id, StreamInfo};
use crate::outcome::INTERRUPTED;
use crate::test_type::{self, ClientSide, Wire};

/// How long a UDP stream waits for the server's connect reply (iperf3: 30 s).
const UDP_REPLY_WAIT: Duration = Duration::from_secs(30);

/// Where an iperf3 test's output goes: a linerate sink, or iperf3's own
/// formats (`linerate_iperf3::output`, which also need the connection
/// ([`Connection`]) and the server's results as sent).
pub trait Output {
    fn start(&mut self, info: &TestInfo, ctx: &Connection) -> std::io::Result<()>;
    fn interval(&mut self, rec: &IntervalRecord) -> std::io::Result<()>;
    fn finish(&mut self, report: &Report, server: &Results) -> std::io::Result<()>;
}

/// A linerate sink as an [`Output`].
struct Plain<'s>(&'s mut dyn Sink);

impl Output for Plain<'_> {
    fn start(&mut self, info: &TestInfo, _: &Connection) -> std::io::Result<()> {
        self.0.start(info)
    }
    fn interval(&mut self, rec: &IntervalRecord) -> std::io::Result<()> {
        self.0.interval(rec)
    }
    fn finish(&mut self, report: &Report, _: &Results) -> std::io::Result<()> {
        self.0.finish(report)
    }
}

/// Runs one test against an iperf3 server, rendering to `sink`.
pub fn run_to(cfg: &ClientConfig, sink: &mut dyn Sink) -> Result<Report, RunError> {
    run(cfg, &Extras::default(), &mut Plain(sink))
}

/// Runs one test against an iperf3 server (or a linerate server, which
/// speaks iperf3's protocol too), rendering to `out`.
pub fn run(cfg: &ClientConfig, extras: &Extras, out: &mut dyn Output) -> Result<Report, RunError> {
    let Target::Remote { host, port } = &cfg.target else {
        return Err(RunError::Spec(
            "--iperf3 needs HOST: the iperf3 server to test against".to_string(),
        ));
    };
    let mut params =
        linerate_iperf3::params_of(&cfg.spec).map_err(|e| RunError::Spec(e.to_string()))?;
    params.get_server_output = extras.get_server_output;
    params.server_affinity = extras.server_affinity;
    let mut addrs = socket::resolve(host, *port).map_err(RunError::from)?;
    if let Some(f) = extras.family {
        addrs.retain(|a| a.is_ipv4() == (f == Family::V4));
        if addrs.is_empty() {
            let v = if f == Family::V4 { "IPv4" } else { "IPv6" };
            return Err(RunError::Spec(format!("{host} has no {v} address")));
        }
    }
    let sock = socket::connect_any_from(
        &addrs,
        extras.bind,
        &Default::default(),
        cfg.connect_timeout,
    )
    .with_context(|| {
        let from = extras
            .bind
            .map_or(String::new(), |b| format!(" from {b} (-B)"));
        format!("cannot reach an iperf3 server at {host} port {port}{from}")
    })?;
    let peer = socket::canonical(sock.peer_addr().context("peer address")?);
    let mut random = [0u8; COOKIE_LEN];
    getrandom::fill(&mut random).map_err(|e| no_randomness("the cookie", e))?;
    let cookie = Cookie::from_random(random);
    let ctx = Connection {
        host: host.clone(),
        port: *port,
        cookie: String::from_utf8_lossy(&cookie.0[..COOKIE_LEN - 1]).into_owned(),
        params: params.clone(),
        streams: Vec::new(),
        mss: None,
        sndbuf: None,
        rcvbuf: None,
        congestion: None,
        connected_unix_ms: unix_ms(),
        version: software(),
        system_info: system_info(),
    };
    let session =
        Iperf3ClientSession::new(params, cookie, Instant::now()).with_spec(cfg.spec.clone());
    let mut ctrl = ControlConn::new(sock)?;
    let mut test = Test {
        cfg,
        peer,
        bind: extras.bind,
        session,
        out,
        ctx,
        setups: Vec::new(),
        streams: Vec::new(),
        tcp_receivers: Vec::new(),
        keep: Vec::new(),
        run: None,
        last_interval: None,
        started: None,
        omit_base: None,
        ran: None,
        info: None,
        output_closed: false,
    };
    let result = control::drive(&mut test, &mut ctrl).and_then(|()| test.finish());
    if let Some(run) = &test.run {
        run.abort();
    }
    result
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

struct Test<'a, 's> {
    cfg: &'a ClientConfig,
    peer: SocketAddr,
    /// `-B`: the local address every connection is made from.
    bind: Option<std::net::IpAddr>,
    session: Iperf3ClientSession,
    out: &'s mut dyn Output,
    ctx: Connection,
    setups: Vec<StreamSetup>,
    streams: Vec<StreamInfo>,
    tcp_receivers: Vec<TcpStream>,
    /// Duplicates of every data socket, held until the test is over: an
    /// iperf3 server treats a data connection closed before it has read
    /// TEST_END (a reset, a port unreachable) as a failed test.
    keep: Vec<DataSocket>,
    run: Option<SideRun>,
    /// The interval before the next one (for per-interval deltas).
    last_interval: Option<measure::IntervalMeasurement>,
    started: Option<Instant>,
    /// What the streams had moved when the omit period ended (-n/-k with
    /// -R or --bidir count from there).
    omit_base: Option<linerate_engine::runner::Progress>,
    /// From the start to TEST_END.
    ran: Option<Duration>,
    info: Option<TestInfo>,
    /// Standard output was closed under us (`linerate … --iperf3 | head
    /// -1`): the test ends now and quietly, as a native one does (issue 28).
    output_closed: bool,
}

/// The iperf3 client's side as the one control driver runs it: the same
/// loop, waits and deadlines as a native client's test.
impl ControlSide for Test<'_, '_> {
    type Session = Iperf3ClientSession;

    fn session(&mut self) -> &mut Iperf3ClientSession {
        &mut self.session
    }

    fn act(&mut self, action: ClientAction, _: &mut ControlConn) -> Result<()> {
        self.carry_out(action)
    }

    fn send_failed(&mut self, _: std::io::Error) -> Result<()> {
        self.session.peer_closed();
        Ok(())
    }

    /// Ends the test (TEST_END) at its limit or once the output is closed;
    /// aborts it (CLIENT_TERMINATE) on Ctrl-C, or when the output is closed
    /// before it runs.
    fn turn(&mut self, _: &mut ControlConn) -> bool {
        if self.session.is_finished() {
            return false;
        }
        if INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) {
            self.session.abort("interrupted");
            return true;
        }
        let ended = self.ran.is_some();
        if self.output_closed && !ended && !self.session.is_running() {
            self.session.abort("the client's output was closed");
            return true;
        }
        if self.session.is_running() && (self.output_closed || self.time_is_up()) {
            self.end_test();
            return true;
        }
        false
    }

    fn run(&mut self) -> Option<&mut SideRun> {
        self.run.as_mut()
    }

    fn interval(&mut self, m: measure::IntervalMeasurement) -> Result<()> {
        let flows = build::flows(&self.cfg.spec);
        let record = build::interval_record(Side::Client, &m, self.last_interval.as_ref(), &flows);
        self.last_interval = Some(m);
        let out = &mut *self.out;
        write_unless_closed(&mut self.output_closed, || out.interval(&record))
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(5)
    }
}

impl Test<'_, '_> {
    /// The client's end condition: `omit + time`; byte- or block-limited,
    /// every sender done, or (with -R or --bidir, as iperf3 ends them)
    /// that many bytes or blocks sent or received in all since the omit
    /// period.
    fn time_is_up(&mut self) -> bool {
        let p = self.session.params();
        let omit = Duration::from_secs(u64::from(p.omit));
        match (self.started, p.time) {
            (Some(t0), t) if t > 0 => t0.elapsed() >= Duration::from_secs(u64::from(t)) + omit,
            (Some(t0), _) if p.direction != IDirection::Normal => {
                let (Some(run), true) = (&self.run, t0.elapsed() >= omit) else {
                    return false;
                };
                // iperf3 counts from the end of the omit period (the
                // counters' zero without one).
                let now = run.progress();
                let base = *self.omit_base.get_or_insert(if omit.is_zero() {
                    linerate_engine::runner::Progress::default()
                } else {
                    now
                });
                let (num, blocks) = (p.num, p.blockcount);
                let udp = p.protocol == IProtocol::Udp;
                (num > 0
                    && (now.sent_bytes - base.sent_bytes >= num
                        || now.received_bytes - base.received_bytes >= num))
                    || (blocks > 0
                        && udp
                        && (now.sent_datagrams - base.sent_datagrams >= blocks
                            || now.received_datagrams - base.received_datagrams >= blocks))
            }
            // Every sender done (the driver has this side's results).
            _ => self.session.measured().is_some(),
        }
    }

    fn carry_out(&mut self, a: ClientAction) -> Result<()> {
        match a {
            ClientAction::CreateStreams => {
                self.create_streams()?;
                self.session.streams_created(Instant::now());
            }
            ClientAction::TestStart => self.start()?,
            ClientAction::TestRunning => {}
            ClientAction::SendResults => self.send_results()?,
        }
        Ok(())
    }

    fn create_streams(&mut self) -> Result<()> {
        let p = self.session.params().clone();
        let cookie = *self.session.cookie();
        let plan = self.cfg.spec.stream_plan();
        for index in 0..p.direction.stream_count(p.parallel) {
            let role = client_role(p.direction, p.parallel, index);
            let id = linerate_id(index);
            let sock = match p.protocol {
                IProtocol::Tcp => {
                    let mut s = socket::connect_any_from(
                        &[self.peer],
                        self.bind,
                        &self.cfg.spec.tcp,
                        self.cfg.connect_timeout,
                    )
                    .with_context(|| format!("stream {id}: connecting to {}", self.peer))?;
                    s.write_all(&cookie.0).context("sending the cookie")?;
                    if let (Role::Sender, Some(bps)) = (role, self.cfg.spec.tcp.rate) {
                        linerate_engine::tcp_pace::set(&s, bps)?;
                    }
                    socket::set_io_timeout(&s, linerate_engine::stream::POLL)?;
                    if role == Role::Receiver {
                        self.tcp_receivers
                            .push(s.try_clone().context("stream socket")?);
                    }
                    DataSocket::Tcp(s)
                }
                IProtocol::Udp => {
                    let s = self.udp_stream(id, p.window)?;
                    if role == Role::Receiver {
                        // GRO and timestamps on before the server's first datagram.
                        udp::prepare_recv(self.cfg.engine, &s);
                    }
                    DataSocket::Udp(s)
                }
            };
            self.note_stream(id, &sock);
            self.keep.push(match &sock {
                DataSocket::Tcp(t) => DataSocket::Tcp(t.try_clone().context("stream socket")?),
                DataSocket::Udp(u) => DataSocket::Udp(u.try_clone().context("stream socket")?),
            });
            let slot = linerate_iperf3::server::StreamSlot {
                index,
                id: linerate_iperf3::stream_id(index),
                role,
            };
            self.streams.push(StreamInfo { slot });
            self.setups.push(StreamSetup {
                id,
                sender: match role {
                    Role::Sender => Side::Client,
                    Role::Receiver => Side::Server,
                },
                role: match role {
                    Role::Sender => measure::Role::Sender,
                    Role::Receiver => measure::Role::Receiver,
                },
                bytes: plan.get(index as usize).and_then(|s| s.bytes),
                datagrams: plan.get(index as usize).and_then(|s| s.datagrams),
                sock,
            });
        }
        Ok(())
    }

    /// Keeps a data socket's addresses, and the first one's MSS, buffers
    /// and congestion control, for iperf3's output.
    fn note_stream(&mut self, id: u32, sock: &DataSocket) {
        let (local, remote) = match sock {
            DataSocket::Tcp(t) => (t.local_addr(), t.peer_addr()),
            DataSocket::Udp(u) => (u.local_addr(), u.peer_addr()),
        };
        if let (Ok(local), Ok(remote)) = (local, remote) {
            self.ctx.streams.push(StreamAddrs {
                id,
                local: socket::canonical(local),
                remote: socket::canonical(remote),
            });
        }
        if self.ctx.streams.len() != 1 {
            return;
        }
        match sock {
            DataSocket::Tcp(t) => {
                self.ctx.mss = linerate_engine::tcp_info::read(t).map(|i| i.snd_mss);
                (self.ctx.sndbuf, self.ctx.rcvbuf) = socket::buffer_sizes(t);
                self.ctx.congestion = socket::congestion(t);
            }
            DataSocket::Udp(u) => {
                let r = socket2::SockRef::from(u);
                self.ctx.sndbuf = r.send_buffer_size().ok();
                self.ctx.rcvbuf = r.recv_buffer_size().ok();
            }
        }
    }

    /// iperf3's UDP stream handshake: "9876", then the server's reply.
    fn udp_stream(&self, id: u32, window: Option<u32>) -> Result<UdpSocket> {
        let s = udp::connect_from(self.peer, self.bind)?;
        if let Some(w) = window {
            udp::set_buffers(&s, w)?;
        }
        s.send(&iudp::CONNECT).context("UDP connect datagram")?;
        s.set_read_timeout(Some(UDP_REPLY_WAIT))?;
        let mut b = [0u8; 64];
        let n = s
            .recv(&mut b)
            .with_context(|| format!("stream {id}: no reply to the UDP connect datagram"))?;
        if !iudp::is_reply(&b[..n]) {
            fail!(
                Protocol,
                "stream {id}: unexpected UDP connect reply {:02x?}",
                &b[..n.min(8)]
            );
        }
        s.set_write_timeout(Some(linerate_engine::stream::POLL))?;
        Ok(s)
    }

    fn start(&mut self) -> Result<()> {
        let spec = &self.cfg.spec;
        let p = self.session.params().clone();
        let mut info = TestInfo {
            server: self.peer.to_string(),
            client_software: software(),
            server_software: "iperf3".into(),
            client_engine: self.cfg.engine.name().into(),
            server_engine: "iperf3".into(),
            client_ld_preload: crate::about::ld_preload(),
            start_unix_ms: unix_ms(),
            ..TestInfo::from_spec(spec, Side::Client)
        };
        info.congestion_used = self
            .ctx
            .congestion
            .clone()
            .or_else(|| spec.tcp.congestion.clone());
        let (out, ctx) = (&mut *self.out, &self.ctx);
        write_unless_closed(&mut self.output_closed, || out.start(&info, ctx))?;
        self.info = Some(info);
        // The data phase starts through the test's entry, as a native
        // client's does, in iperf3's wire format.
        let side = ClientSide {
            engine: self.cfg.engine,
            wire: Wire::Iperf3 {
                counters_64bit: p.udp_counters_64bit,
            },
            peer: self.peer,
            token: None,
            cpus: &self.cfg.cpus,
            cpu_scope: test_type::cpu_scope(false),
            connect_timeout: self.cfg.connect_timeout,
            clock: None,
            unix_name: None,
        };
        self.started = Some(Instant::now());
        let setups = std::mem::take(&mut self.setups);
        self.run = Some((test_type::of(spec).start_client)(&side, spec, setups)?);
        Ok(())
    }

    /// The end of the test: stops the senders and sends TEST_END; the
    /// receivers go on until the server has stopped its senders
    /// ([`Self::send_results`]).
    fn end_test(&mut self) {
        self.ran = Some(self.started.map_or(Duration::ZERO, |t| t.elapsed()));
        if let Some(run) = &self.run {
            run.stop_senders();
        }
        self.session.stop(Instant::now());
    }

    /// EXCHANGE_RESULTS: the server's senders have stopped; end the
    /// receivers (reading what is queued), collect this side's results and
    /// send them.
    fn send_results(&mut self) -> Result<()> {
        if let Some(run) = &mut self.run {
            let measured = self.session.measured().is_some();
            if let Some(r) = super::end_data_phase(run, &self.tcp_receivers, measured) {
                self.session.local_finished(r);
            }
        }
        while let Some(m) = self.run.as_mut().and_then(|r| r.next_interval()) {
            self.interval(m)?;
        }
        self.run = None;
        self.tcp_receivers.clear();
        let local = self.session.measured().ok_or_else(|| {
            RunError::Protocol("the data streams did not stop within 10 s".to_string())
        })?;
        let p = self.session.params();
        let ours = conv::local_results(
            p,
            local,
            &self.streams,
            self.cfg.spec.tcp.congestion.clone(),
            self.ran.unwrap_or_default(),
        );
        self.session.results(ours, Instant::now());
        Ok(())
    }

    fn finish(&mut self) -> Result<Report, RunError> {
        let server: Results = match self.session.outcome() {
            Some(ClientOutcome::Completed { server }) => server.clone(),
            _ if self.output_closed => return Err(closed_output()),
            Some(ClientOutcome::Failed(Iperf3Error::Aborted(_)))
                if INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                return Err(RunError::Interrupted { reported: false })
            }
            Some(ClientOutcome::Failed(e)) => {
                return Err(match e {
                    Iperf3Error::AccessDenied => RunError::Refused(e.to_string()),
                    _ => RunError::Protocol(format!("iperf3 server at {}: {e}", self.peer)),
                })
            }
            None => {
                return Err(RunError::Protocol(
                    "iperf3 test ended unexpectedly".to_string(),
                ))
            }
        };
        let p = self.session.params().clone();
        let mut local = self.session.measured().cloned().unwrap_or_default();
        let mut remote = conv::checked_peer_side(&p, &self.cfg.spec, &server, Side::Server)
            .map_err(|why| RunError::Protocol(format!("iperf3 server at {}: {why}", self.peer)))?;
        conv::apply_sender_counts(&mut local, &remote);
        conv::apply_sender_counts(&mut remote, &local);
        let mut notes = vec![
            "server: its figures came over iperf3's protocol (bytes after the omit period, CPU from its percentages, UDP loss and jitter by iperf3's rules)".to_string(),
        ];
        notes.extend(conv::short_sender_notes(&local, &remote, Side::Client));
        let info = self
            .info
            .clone()
            .unwrap_or_else(|| TestInfo::from_spec(&self.cfg.spec, Side::Client));
        let spec = &self.cfg.spec;
        let report = (test_type::of(spec).build)(info, spec, &local, &remote, notes);
        let out = &mut *self.out;
        write_unless_closed(&mut self.output_closed, || out.finish(&report, &server))?;
        if self.output_closed {
            return Err(closed_output());
        }
        Ok(report)
    }
}
