"""The cost of one sandboxed `run_python` call: the kernel-enforced sandbox against the one it
replaced, side by side in one run.

    python benchmarks/sandbox.py [--calls 40] [--rounds 5] [--baseline-rev 9fbafa9]

The baseline is the audit-hook sandbox as it was at `--baseline-rev` (its `sandbox.py` and
`_child.py`, read from git into a temporary package); without git it falls back to this
version's `SandboxMode.UNSAFE_PROCESSES` (the same kind of plain process) and says so. Each
round times `--calls` sequential calls of a small math program with each implementation,
interleaved, so that load on the machine hits both alike; the per-call figures are the median
over calls, and the reported value is the median over rounds (with the min). The last line is
`call_ms_p50=X baseline_ms_p50=Y ratio=X/Y`.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentrl.envs.pycode.sandbox import SandboxMode, run_sandboxed

REPO = Path(__file__).resolve().parents[1]
PROGRAM = "import math\nprint(sum(math.comb(40, k) % 97 for k in range(41)))"
EXPECTED = f"{sum(__import__('math').comb(40, k) % 97 for k in range(41))}\n"


def _old_sandbox(rev: str) -> tuple[Callable[[str], object], str] | None:
    """`run_sandboxed` of the sandbox at git revision `rev`, or None without git."""
    folder = Path(tempfile.mkdtemp(prefix="agentrl-old-sandbox-"))
    try:
        for name in ("sandbox.py", "_child.py"):
            text = subprocess.run(
                ["git", "show", f"{rev}:src/agentrl/envs/pycode/{name}"],
                cwd=REPO, capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            (folder / name).write_text(text)
    except (OSError, subprocess.CalledProcessError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    spec = importlib.util.spec_from_file_location("agentrl_old_sandbox", folder / "sandbox.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.run_sandboxed, f"the audit-hook sandbox at {rev}"


def _time_calls(run: Callable[[str], object], calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        result = run(PROGRAM)
        times.append((time.perf_counter() - start) * 1000)
        if getattr(result, "stdout", None) != EXPECTED:
            raise SystemExit(f"wrong output: {result!r}")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per round and sandbox")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--baseline-rev", default="9fbafa9", help="git revision of the baseline")
    args = parser.parse_args()
    old = _old_sandbox(args.baseline_rev)
    if old is None:
        baseline, label = (
            lambda code: run_sandboxed(code, mode=SandboxMode.UNSAFE_PROCESSES),
            "unsafe-processes mode (no git for the old sandbox)",
        )
    else:
        baseline, label = old
    print(f"baseline: {label}; program: {PROGRAM!r}")
    new_p50, old_p50 = [], []
    for round_ in range(args.rounds):
        new = _time_calls(run_sandboxed, args.calls)
        before = _time_calls(baseline, args.calls)
        new_p50.append(statistics.median(new))
        old_p50.append(statistics.median(before))
        print(
            f"round {round_ + 1}: strict p50 {new_p50[-1]:.1f} ms, baseline p50 "
            f"{old_p50[-1]:.1f} ms, ratio {new_p50[-1] / old_p50[-1]:.2f}",
            flush=True,
        )
    call, base = statistics.median(new_p50), statistics.median(old_p50)
    print(f"min over rounds: strict {min(new_p50):.1f} ms, baseline {min(old_p50):.1f} ms")
    print(f"call_ms_p50={call:.1f} baseline_ms_p50={base:.1f} ratio={call / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
