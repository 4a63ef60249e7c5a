"""The sandbox suites again, as an unprivileged user (uid 64000), the way a laptop runs them.

As root, the test builds a private mount namespace in which the interpreter (under `/root`,
which only root may enter) and the checkout (wherever it was cloned) are visible to others,
gives the user a home with `~/.ssh` and runs `test_sandbox.py` and `test_sandbox_attacks.py` in
a pytest of that user: bubblewrap then runs unprivileged, with the user's own uid outside the
sandbox. Run as a normal user, those two
modules already are this suite, so the test skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

USER = 64000
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox is Linux only"),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="not root: test_sandbox*.py already run as a normal user"
    ),
]


def _hidden_ancestor(path: str) -> str | None:
    """The first folder above `path` that others may not enter (None: all may)."""
    parts = Path(path).parts
    for depth in range(2, len(parts) + 1):
        folder = os.path.join(*parts[:depth])
        if os.path.isdir(folder) and not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def test_the_sandbox_suites_pass_as_an_unprivileged_user() -> None:
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("util-linux's unshare and setpriv are needed to switch user")
    home = Path(tempfile.mkdtemp(prefix="agentrl-nonroot-home-"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA owner\n")
    for path in (home, home / ".ssh", home / ".ssh" / "authorized_keys"):
        os.chown(path, USER, USER)
    home.chmod(0o755)
    script = ["set -e"]
    # make the interpreter and this checkout reachable (in this namespace only) where a folder
    # above them is closed to others (/root, a private mktemp folder): each is bound aside, the
    # closed folder covered by an open tmpfs, and the path bound back
    exposed = [(p, h) for p in (sys.base_prefix, str(REPO)) if (h := _hidden_ancestor(p))]
    stages = [(path, tempfile.mkdtemp(prefix="agentrl-stage-")) for path, _ in exposed]
    script += [f"mount --bind {path} {stage}" for path, stage in stages]
    hidden = sorted({h for _, h in exposed}, key=len)
    outer = [h for h in hidden if not any(h.startswith(o + os.sep) for o in hidden if o != h)]
    script += [f"mount -t tmpfs -o mode=755 tmpfs {h}" for h in outer]
    for path, stage in stages:
        script += [f"mkdir -p {path}", f"mount --bind {stage} {path}"]
    tests = ["tests/envs/pycode/test_sandbox.py", "tests/envs/pycode/test_sandbox_attacks.py"]
    pytest_cmd = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
        "--basetemp", str(home / "pytest"), *tests,
    ]  # fmt: skip
    script.append(
        f"exec setpriv --reuid {USER} --regid {USER} --clear-groups -- " + " ".join(pytest_cmd)
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "USER": "agentrl-test",
        "LOGNAME": "agentrl-test",
        "CI": os.environ.get("CI", ""),
        "AGENTRL_ALLOW_SKIPS": os.environ.get("AGENTRL_ALLOW_SKIPS", ""),
    }
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(script)],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail
    assert " passed" in tail and "skipped" not in tail and "failed" not in tail, tail
