"""Unit tests of bench/benchlib's parsers and tables (no tool runs).

    python3 -m unittest discover -s bench/tests

The neper outputs are cut from real runs of neper 1.1.0 (commit ea5890f)
on loopback: its option echo, then its results, one `key=value` a line.
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import parse, stats  # noqa: E402
from benchlib.core import RunFailed  # noqa: E402

# tcp_stream's client (the writer): no throughput= of its own, the reader's
# rate in remote_throughput= (bit/s).
NEPER_STREAM_CLIENT = """VERSION=1.1.0
throughput_opt=Mb
percentiles=
num_threads=2
num_flows=1000
total_run_time=2
time_start=77243.586771413
utime_start=0.000000
utime_end=0.029237
stime_start=0.003198
stime_end=0.417409
local_throughput=0
remote_throughput=10892487362
"""

NEPER_RR_CLIENT = """VERSION=1.1.0
percentiles=50,99,
request_size=1
num_flows=1000
total_run_time=2
num_transactions=110724
latency_min=0.002030663
latency_mean=0.016440618
latency_p50=0.013926390
latency_p99=0.057016310
num_samples=10000
correlation_coefficient=1.00
throughput=56953.25
local_throughput=56953
remote_throughput=55095
"""


class NeperKeys(unittest.TestCase):
    def test_every_key_value_line_and_nothing_else(self):
        keys = parse.neper_keys("VERSION=1.1.0\npercentiles=50,99,\nwarning: slow start\n"
                                "a b=c\nlog_rtt=\n  throughput=1.5  \n")
        self.assertEqual(keys, {"VERSION": "1.1.0", "percentiles": "50,99,", "log_rtt": "", "throughput": "1.5"})

    def test_a_later_key_wins(self):
        self.assertEqual(parse.neper_keys("throughput=1\nthroughput=2\n")["throughput"], "2")

    def test_a_value_may_hold_an_equals_sign(self):
        self.assertEqual(parse.neper_keys("host=a=b\n")["host"], "a=b")


class NeperStream(unittest.TestCase):
    def test_the_receivers_rate_in_gbit(self):
        self.assertAlmostEqual(parse.neper_stream(NEPER_STREAM_CLIENT)["gbps"], 10.892487362)

    def test_zero_bytes_is_a_failed_run(self):
        with self.assertRaises(RunFailed):
            parse.neper_stream(NEPER_STREAM_CLIENT.replace("remote_throughput=10892487362", "remote_throughput=0"))

    def test_a_cut_off_output_is_a_failed_run_saying_what_is_missing(self):
        with self.assertRaisesRegex(RunFailed, "remote_throughput"):
            parse.neper_stream("VERSION=1.1.0\nnum_flows=1000\n")


class NeperRr(unittest.TestCase):
    def test_transactions_and_percentiles_in_microseconds(self):
        m = parse.neper_rr(NEPER_RR_CLIENT)
        self.assertAlmostEqual(m["tps"], 56953.25)
        self.assertAlmostEqual(m["p50_us"], 13926.39)
        self.assertAlmostEqual(m["p99_us"], 57016.31)

    def test_without_percentiles_only_the_rate(self):
        text = "\n".join(ln for ln in NEPER_RR_CLIENT.splitlines() if not ln.startswith("latency_p"))
        self.assertEqual(set(parse.neper_rr(text)), {"tps"})

    def test_no_transactions_is_a_failed_run(self):
        with self.assertRaises(RunFailed):
            parse.neper_rr(NEPER_RR_CLIENT.replace("throughput=56953.25", "throughput=0.00"))
        with self.assertRaisesRegex(RunFailed, "throughput"):
            parse.neper_rr("VERSION=1.1.0\n")

    def test_an_unreadable_number_is_a_failed_run(self):
        with self.assertRaises(RunFailed):
            parse.neper_rr(NEPER_RR_CLIENT.replace("throughput=56953.25", "throughput=nan-ish"))


class Reference(unittest.TestCase):
    """A cell's reference variant (linerate -P 2 beside --flows): its own ratio column."""

    def outcomes(self):
        return [stats.Outcome("flows", False, runs=[{"gbps": 9.0}, {"gbps": 11.0}]),
                stats.Outcome("-P 2", False, runs=[{"gbps": 20.0}], reference=True),
                stats.Outcome("neper", True, runs=[{"gbps": 8.0}])]

    def test_the_table_has_a_ratio_to_the_reference(self):
        lines = stats.table(self.outcomes(), ["gbps"])
        self.assertIn("× reference (Gbit/s)", lines[0])
        flows = next(ln for ln in lines if ln.startswith("| flows"))
        self.assertEqual(flows.split(" | ")[-2], "0.50")   # 10 / 20
        self.assertEqual(flows.split(" | ")[-3], "1.25")   # 10 / neper's 8

    def test_headlines_leave_the_reference_out_of_the_best_linerate_variant(self):
        self.assertEqual(stats.headline(self.outcomes(), "gbps"), ("flows", 1.25))
        self.assertEqual(stats.headline(self.outcomes(), "gbps", against_reference=True), ("flows", 0.5))

    def test_no_reference_no_column(self):
        self.assertNotIn("reference", stats.table(self.outcomes()[::2], ["gbps"])[0])


if __name__ == "__main__":
    unittest.main()
