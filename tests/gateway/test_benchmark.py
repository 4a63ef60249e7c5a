"""`benchmarks/gateway.py` plumbing at a tiny size: its server subprocess, the exactness check
and the summary line (the timings themselves are not asserted: they belong to the benchmark)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers.paths import BENCHMARKS

SUMMARY = r"overhead_ms_p50=[\d.]+ overhead_ms_p95=[\d.]+ calls_per_s=\d+ exact=(true|false)"


def test_gateway_benchmark_smoke() -> None:
    command = [sys.executable, str(BENCHMARKS / "gateway.py"), "--episodes", "1"]
    command += ["--sessions", "3", "--turns", "3", "--repeats", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(SUMMARY, last), last
    assert last.endswith("exact=true"), done.stdout[-2000:]
