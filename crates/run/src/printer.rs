//! A client's output, written off its control loop's thread (issue 28).
//!
//! The control loop sends the heartbeats that keep a test alive. While it
//! waited on a blocked write to stdout (a paused pager,
//! `linerate tcp HOST | (sleep 20; cat)`, a full pipe nobody reads) it
//! sent none, and the server gave up on a live client. So what a test
//! prints — its start, interval records, rr sizes and the final report,
//! in linerate's formats ([`Sink`]) and iperf3's ([`Output`]) — is handed
//! to a [`Printer`]: one thread that owns the output and does the
//! blocking writes, in the order handed over. The final report's hand-over
//! waits until everything is written (a test ends once its output is out,
//! and a closed stdout's broken pipe still ends it quietly); so does
//! dropping the printer. A write error comes back from the next hand-over,
//! so the control loop stops the test as when it wrote itself.
//!
//! Memory stays bounded however long nobody reads. What waits is records,
//! not text, and only interval records come without end (at most 100 a
//! second per test): they wait up to [`QUEUED_ROWS_MAX`] rows (a row per
//! stream and per sum of a record). Beyond that, the next ones are left
//! out — the control loop never waits — and the printer says on stderr how
//! many once it writes again; the totals and the final report are
//! unaffected. Everything else (the start, a record per rr size, the final
//! report) is a handful per test and always waits its turn.
//!
//! A server's stdout is the same story: while its tests' threads wrote their
//! reports themselves, a reader that did not read held each test's thread
//! and control connection (an iperf3 test's slot too: the next test was
//! refused as busy). So the server has one printer
//! for the process ([`ServerOut`]), which its tests (native and iperf3)
//! hand their reports to, in the order they end, without waiting. Reports
//! come without end too (a server serves for weeks): they share the same
//! bound, a report counting its rows, and are left out (said on stderr)
//! beyond it; the `--json-lines-file` records and `--metrics` keep them.

use std::io::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_iperf3::json::Results;
use linerate_iperf3::output::Connection;
use linerate_report::model::{IntervalRecord, RrPhaseRecord, TestInfo};
use linerate_report::render::{self, Format, Sink};
use linerate_report::Report;

use crate::iperf3::client::Output;

/// The most interval rows waiting to be written. A row is at most about
/// 270 bytes in memory (a stream's record with its TCP_INFO), so what
/// waits stays under 20 MiB; at 1 s intervals that is 6 hours of one
/// stream's records (3 rows each: the stream, its sum, the record), or
/// 8 minutes of `-P 128`'s.
pub const QUEUED_ROWS_MAX: usize = 1 << 16;

/// One hand-over: what to do with the output.
type Job<S> = Box<dyn FnOnce(&mut S) -> io::Result<()> + Send>;

/// A thread writing to an output `S` (a [`Sink`], an iperf3 [`Output`]),
/// fed in order through a queue.
pub struct Printer<S> {
    /// Jobs with their interval rows (0 for the others).
    queue: Option<mpsc::Sender<(usize, Job<S>)>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The output is this process's stdout, watched for its reader's
    /// close ([`Printer::watching_stdout`]).
    stdout: bool,
}

/// What the printer says on stderr of the `n` hand-overs it left out: its
/// output's name, and what was left out.
type SaysLeftOut = (&'static str, fn(usize) -> String);

/// Which write errors stop a printer (every later hand-over dropped, the
/// error coming back from the next); on the others the hand-over is left
/// out (and said) and the printer goes on.
type Stops = fn(&io::Error) -> bool;

/// A report's output: any write error ends the test's output, as when the
/// control loop wrote itself.
fn every_error(_: &io::Error) -> bool {
    true
}

/// A server's log: only a closed stream (its reader gone). Anything else
/// (EAGAIN on a stderr a supervisor made non-blocking) loses that line,
/// not every later one (issue 28).
fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::WriteZero | io::ErrorKind::NotConnected
    )
}

/// What the printer thread and its feeder share.
struct Shared {
    /// Interval rows queued and not written yet.
    queued_rows: AtomicUsize,
    /// Interval records left out since the printer last said so.
    left_out: AtomicUsize,
    /// The first write error that stops the printer (its kind and
    /// words); nothing is written after it.
    failed: Mutex<Option<(io::ErrorKind, String)>>,
    says: SaysLeftOut,
    stops: Stops,
}

impl Shared {
    fn failure(&self) -> Option<io::Error> {
        let failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed
            .as_ref()
            .map(|(kind, why)| io::Error::new(*kind, why.clone()))
    }

    fn fail(&self, e: &io::Error) {
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        failed.get_or_insert_with(|| (e.kind(), e.to_string()));
    }

    /// Says on stderr how many hand-overs were left out since it last
    /// said so: never silently.
    fn say_left_out(&self) {
        let n = self.left_out.swap(0, Ordering::Relaxed);
        if n > 0 {
            // One write, as a log line is ([`crate::log`]'s `put`).
            let line = format!(
                "linerate: {} was not read for a while: {}\n",
                self.says.0,
                (self.says.1)(n)
            );
            let _ = io::stderr().lock().write_all(line.as_bytes());
        }
    }
}

/// A client's: interval records.
fn intervals_left_out(n: usize) -> String {
    format!(
        "{n} interval record{} left out (the totals are unaffected)",
        if n == 1 { " was" } else { "s were" }
    )
}

/// A server's: test reports.
fn reports_left_out(n: usize) -> String {
    format!(
        "{n} test report{} left out (the tests ran; --json-lines-file and --metrics have them)",
        if n == 1 { " was" } else { "s were" }
    )
}

/// A server's: log lines ([`crate::log`]).
fn log_lines_left_out(n: usize) -> String {
    format!(
        "{n} log line{} left out",
        if n == 1 { " was" } else { "s were" }
    )
}

impl<S: 'static> Printer<S> {
    /// Starts the printer thread, whose output `make` builds there (so it
    /// need not be `Send`: a sink holding stdout, a progress bar).
    pub fn spawn(make: impl FnOnce() -> S + Send + 'static) -> io::Result<Self> {
        Self::spawn_saying(("standard output", intervals_left_out), every_error, make)
    }

    /// A printer of a server's log lines ([`crate::log`]).
    pub(crate) fn spawn_log(make: impl FnOnce() -> S + Send + 'static) -> io::Result<Self> {
        Self::spawn_saying(("standard error", log_lines_left_out), closed, make)
    }

    /// [`Printer::spawn`], saying `says` of what it left out, stopped by
    /// the write errors `stops` tells.
    fn spawn_saying(
        says: SaysLeftOut,
        stops: Stops,
        make: impl FnOnce() -> S + Send + 'static,
    ) -> io::Result<Self> {
        let (queue, jobs) = mpsc::channel::<(usize, Job<S>)>();
        let shared = Arc::new(Shared {
            queued_rows: AtomicUsize::new(0),
            left_out: AtomicUsize::new(0),
            failed: Mutex::new(None),
            says,
            stops,
        });
        let ours = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("linerate-print".into())
            .spawn(move || {
                let mut out = make();
                for (rows, job) in jobs {
                    // After a failure the rest is dropped unwritten.
                    if ours.failure().is_none() {
                        ours.say_left_out();
                        match job(&mut out) {
                            Err(e) if (ours.stops)(&e) => ours.fail(&e),
                            Err(_) => {
                                ours.left_out.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(()) => {}
                        }
                    }
                    ours.queued_rows.fetch_sub(rows, Ordering::Relaxed);
                }
                if ours.failure().is_none() {
                    ours.say_left_out();
                }
            })?;
        Ok(Printer {
            queue: Some(queue),
            shared,
            thread: Some(thread),
            stdout: false,
        })
    }

    /// Says the output is stdout: [`Sink::closed`] then also tells of its
    /// reader's close before anything more is written (poll reports an
    /// error on a pipe whose reader left, a hang-up on a closed terminal),
    /// so `linerate rr HOST | head -1`, which prints nothing between its
    /// heading and its end, stops as soon as `head` has its line.
    #[must_use]
    pub fn watching_stdout(mut self) -> Self {
        self.stdout = true;
        self
    }

    /// Queues `job`, which is never left out. Fails with the printer's
    /// first write error once it had one.
    pub fn send(
        &self,
        job: impl FnOnce(&mut S) -> io::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        self.queue_job(0, Box::new(job))
    }

    /// Queues the `job` of what comes without end (an interval record, a
    /// server's report) of `rows` rows, unless the queue already holds
    /// [`QUEUED_ROWS_MAX`] rows: then it is left out (and said on stderr).
    /// A job bigger than that still goes when nothing waits.
    pub fn send_bounded(
        &self,
        rows: usize,
        job: impl FnOnce(&mut S) -> io::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        let queued = self.shared.queued_rows.load(Ordering::Relaxed);
        if queued > 0 && queued + rows > QUEUED_ROWS_MAX && self.shared.failure().is_none() {
            self.shared.left_out.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.queue_job(rows, Box::new(job))
    }

    fn queue_job(&self, rows: usize, job: Job<S>) -> io::Result<()> {
        if let Some(e) = self.shared.failure() {
            return Err(e);
        }
        let stopped = || io::Error::other("the output thread stopped");
        let queue = self.queue.as_ref().ok_or_else(stopped)?;
        self.shared.queued_rows.fetch_add(rows, Ordering::Relaxed);
        queue.send((rows, job)).map_err(|_| stopped())
    }

    /// Waits until everything queued so far is written; the first write
    /// error, if there was one.
    pub fn flush(&self) -> io::Result<()> {
        self.flush_within(None).map(drop)
    }

    /// [`Printer::flush`], waiting `wait` at most (`None`: as long as it
    /// takes): whether everything was written.
    pub fn flush_within(&self, wait: Option<Duration>) -> io::Result<bool> {
        let (done, written) = mpsc::channel();
        self.send(move |_| {
            let _ = done.send(());
            Ok(())
        })?;
        // Also returns when the job was dropped unrun: after a write
        // failure (said), or when the thread ended (a renderer panicked,
        // its queue dropped): then what was queued is lost, an error.
        let (all, ran) = match wait {
            None => (true, written.recv().is_ok()),
            Some(w) => match written.recv_timeout(w) {
                Ok(()) => (true, true),
                Err(mpsc::RecvTimeoutError::Timeout) => (false, true),
                Err(mpsc::RecvTimeoutError::Disconnected) => (true, false),
            },
        };
        match self.shared.failure() {
            Some(e) => Err(e),
            None if !ran => Err(io::Error::other("the output thread stopped")),
            None => Ok(all),
        }
    }

    /// Drops without waiting: what is left is written while the process
    /// lives, and abandoned when it ends.
    fn detach(&mut self) {
        drop(self.thread.take());
    }
}

impl<S> std::fmt::Debug for Printer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer")
            .field("queued_rows", &self.shared.queued_rows)
            .field("failed", &self.shared.failure())
            .finish_non_exhaustive()
    }
}

impl<S> Drop for Printer<S> {
    /// Waits for everything queued to be written: leaves no thread behind
    /// and no line unwritten.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// An interval record's rows, the unit of the queue's bound.
fn rows(rec: &IntervalRecord) -> usize {
    1 + rec.streams.len() + rec.sums.len()
}

impl Sink for Printer<Box<dyn Sink>> {
    fn start(&mut self, info: &TestInfo) -> io::Result<()> {
        let info = info.clone();
        self.send(move |s| s.start(&info))
    }
    fn interval(&mut self, rec: &IntervalRecord) -> io::Result<()> {
        let rec = rec.clone();
        self.send_bounded(rows(&rec), move |s| s.interval(&rec))
    }
    fn rr_phase(&mut self, rec: &RrPhaseRecord) -> io::Result<()> {
        let rec = rec.clone();
        self.send(move |s| s.rr_phase(&rec))
    }
    fn finish(&mut self, report: &Report) -> io::Result<()> {
        let report = report.clone();
        self.send(move |s| s.finish(&report))?;
        self.flush()
    }
    fn closed(&self) -> bool {
        let hung_up = || {
            // No events asked: true only on an error or a hang-up.
            linerate_engine::socket::wait_ready(&io::stdout(), 0, Duration::ZERO).unwrap_or(false)
        };
        (self.shared.failure()).is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            || (self.stdout && hung_up())
    }
}

impl<O: Output + 'static> Output for Printer<O> {
    fn start(&mut self, info: &TestInfo, ctx: &Connection) -> io::Result<()> {
        let (info, ctx) = (info.clone(), ctx.clone());
        self.send(move |o| o.start(&info, &ctx))
    }
    fn interval(&mut self, rec: &IntervalRecord) -> io::Result<()> {
        let rec = rec.clone();
        self.send_bounded(rows(&rec), move |o| o.interval(&rec))
    }
    fn finish(&mut self, report: &Report, server: &Results) -> io::Result<()> {
        let (report, server) = (report.clone(), server.clone());
        self.send(move |o| o.finish(&report, &server))?;
        self.flush()
    }
}

/// A server's stdout (issue 28): one printer for the process, which its
/// tests hand their reports to and never wait on. A write error (a closed
/// stdout) is ignored, as the server always did: the tests go on,
/// unreported on stdout. Dropping it waits until everything is written,
/// unless [`ServerOut::finish`] gave up on it.
#[derive(Debug)]
pub struct ServerOut {
    printer: Printer<io::Stdout>,
    format: Format,
    /// `finish` gave up waiting: dropping it does not wait either.
    abandoned: AtomicBool,
}

impl ServerOut {
    /// Reports in `format`.
    pub fn spawn(format: Format) -> io::Result<Self> {
        let printer = Printer::spawn_saying(
            ("standard output", reports_left_out),
            every_error,
            io::stdout,
        )?;
        Ok(ServerOut {
            printer,
            format,
            abandoned: AtomicBool::new(false),
        })
    }

    /// Waits until everything handed over is written, `wait` at most
    /// (`None`: as long as it takes, so `--once | (sleep 30; cat)` still
    /// prints its report). Past it (a stopped server whose reader does not
    /// read) what is left is abandoned to the process's exit, which it
    /// does not hold.
    pub fn finish(&self, wait: Option<Duration>) {
        // A closed stdout: nothing is left to write.
        if !self.printer.flush_within(wait).unwrap_or(true) {
            self.abandoned.store(true, Ordering::Relaxed);
        }
    }

    /// Queues a line (the address the server listens on).
    pub fn line(&self, text: String) {
        let _ = self.printer.send(move |out| writeln!(out, "{text}"));
    }

    /// Queues a completed test's report: its start (`info`) and its end,
    /// in the server's format; left out beyond the bound.
    pub fn report(&self, info: &TestInfo, report: &Report) {
        let (info, report, format) = (info.clone(), report.clone(), self.format);
        let rows = 1
            + report.streams.len()
            + report.sums.len()
            + report.intervals.iter().map(rows).sum::<usize>()
            + report.server_intervals.iter().map(rows).sum::<usize>();
        let _ = self.printer.send_bounded(rows, move |out| {
            let mut sink = render::sink(format, Box::new(out.lock()));
            sink.start(&info).and_then(|()| sink.finish(&report))
        });
    }
}

impl Drop for ServerOut {
    fn drop(&mut self) {
        if *self.abandoned.get_mut() {
            self.printer.detach();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// What the printer wrote, and a gate its first job waits at: a
    /// reader that does not read.
    struct Stuck {
        gate: mpsc::Receiver<()>,
        seen: Arc<Mutex<Vec<usize>>>,
    }

    fn stuck() -> (Printer<Stuck>, mpsc::Sender<()>, Arc<Mutex<Vec<usize>>>) {
        let (open, gate) = mpsc::channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let theirs = Arc::clone(&seen);
        let p = Printer::spawn(move || Stuck { gate, seen: theirs }).expect("spawn");
        p.send(|s| {
            let _ = s.gate.recv();
            Ok(())
        })
        .expect("send");
        (p, open, seen)
    }

    fn note(i: usize) -> impl FnOnce(&mut Stuck) -> io::Result<()> + Send {
        move |s: &mut Stuck| {
            s.seen.lock().expect("lock").push(i);
            Ok(())
        }
    }

    #[test]
    fn issue_28_a_stuck_output_never_blocks_and_stays_bounded() {
        let (p, open, seen) = stuck();
        let started = Instant::now();
        // Four records of a quarter of the bound each fit; the rest are
        // left out; what is not an interval record is never left out.
        for i in 0..10 {
            p.send_bounded(QUEUED_ROWS_MAX / 4, note(i))
                .expect("interval");
        }
        p.send(note(100)).expect("final");
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(p.shared.left_out.load(Ordering::Relaxed), 6);
        open.send(()).expect("open");
        p.flush().expect("flush");
        assert_eq!(*seen.lock().expect("lock"), [0, 1, 2, 3, 100]);
        // Written: room again.
        assert_eq!(p.shared.queued_rows.load(Ordering::Relaxed), 0);
        assert_eq!(p.shared.left_out.load(Ordering::Relaxed), 0);
        p.send_bounded(QUEUED_ROWS_MAX * 2, note(4))
            .expect("interval");
        drop(p);
        assert_eq!(*seen.lock().expect("lock"), [0, 1, 2, 3, 100, 4]);
    }

    #[test]
    fn issue_28_a_write_error_comes_back_from_the_next_hand_over() {
        let p = Printer::spawn(|| ()).expect("spawn");
        p.send(|_| Err(io::ErrorKind::BrokenPipe.into()))
            .expect("queued");
        let e = p.flush().expect_err("the broken pipe");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        let e = p.send_bounded(1, |_| Ok(())).expect_err("after it");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }

    /// A log output whose next write fails with `fail` once, then works.
    struct Flaky {
        fail: Option<io::ErrorKind>,
        lines: Arc<Mutex<Vec<&'static str>>>,
    }

    fn log_line(line: &'static str) -> impl FnOnce(&mut Flaky) -> io::Result<()> + Send {
        move |out| match out.fail.take() {
            Some(kind) => Err(kind.into()),
            None => {
                out.lines.lock().expect("lines").push(line);
                Ok(())
            }
        }
    }

    /// Issue 28: a server's stderr made non-blocking (by a supervisor)
    /// fails a write with EAGAIN when its reader lags; that line is left
    /// out (said later), and the log goes on. Before, the first write
    /// error silenced every later log line, with no word of it. A broken
    /// pipe still stops it.
    #[test]
    fn issue_28_a_log_line_that_would_block_is_left_out_and_the_log_goes_on() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = Flaky {
            fail: None,
            lines: Arc::clone(&lines),
        };
        let p = Printer::spawn_log(move || out).expect("spawn");
        p.send_bounded(1, log_line("a")).expect("a");
        p.send_bounded(1, |out: &mut Flaky| {
            out.fail = Some(io::ErrorKind::WouldBlock);
            Ok(())
        })
        .expect("arm");
        p.send_bounded(1, log_line("b")).expect("b");
        p.send_bounded(1, log_line("c")).expect("c");
        p.flush().expect("the log goes on");
        assert_eq!(*lines.lock().expect("lines"), ["a", "c"]);
        p.send_bounded(1, |out: &mut Flaky| {
            out.fail = Some(io::ErrorKind::BrokenPipe);
            Ok(())
        })
        .expect("arm");
        p.send_bounded(1, log_line("d")).expect("d");
        let e = p.flush().expect_err("a broken pipe stops it");
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
    }

    /// A renderer that panics ends the printer thread: what was queued is
    /// lost, and the flush says so instead of reporting success (review,
    /// issue 28: the test exited 0 with no report).
    #[test]
    fn issue_28_a_printer_thread_that_died_is_an_error() {
        let p = Printer::spawn(|| ()).expect("spawn");
        p.send(|_| -> io::Result<()> { panic!("a renderer bug") })
            .expect("queued");
        let e = p.flush().expect_err("the thread died");
        assert!(e.to_string().contains("output thread stopped"), "{e}");
    }
}
