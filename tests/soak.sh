#!/usr/bin/env bash
# The full soak of issue 10: 1,000 back-to-back tests of mixed kinds (tcp,
# udp, rr, crr, reverse, bidir, -P 4) against one server, checking that its
# threads and file descriptors never grow and its RSS stays within 64 MiB
# of where it started. CI runs the same test with 200 (cargo test).
#
#   tests/soak.sh [COUNT]    # default 1000; about 5 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
LINERATE_SOAK_TESTS="${1:-1000}" cargo test --release --test e2e \
    issue_10_soak_back_to_back_mixed_tests -- --nocapture
