"""Issue 48 through real `sd` processes (marker `process`: .ci/run's process stage): what a
new user typed, as they typed it. The in-process tests of the same items are in
test_issue48.py (the README run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_issue48 import REFUND, REFUND_EVAL, REFUND_TOOLS, write

pytestmark = pytest.mark.process


def sd(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """`sd ARGS` in `cwd`, as a user's shell runs it: (exit code, stdout, stderr), times as N."""
    done = subprocess.run(
        [sys.executable, "-m", "struckdown.cli", *args], capture_output=True, text=True, check=False, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "HOME": str(cwd), "STRUCKDOWN_CACHE_DIR": str(cwd / "cache")},
    )  # fmt: skip
    seconds = re.compile(r"\d+\.\d+ s\b")
    return done.returncode, seconds.sub("N s", done.stdout), seconds.sub("N s", done.stderr)


def test_eval_approve(tmp_path: Path) -> None:
    """Item 4: `sd eval --approve all|none` decides the calls a template's approve= holds."""
    write(tmp_path / "refund.sd", REFUND), write(tmp_path / "refund.eval.yaml", REFUND_EVAL)
    write(tmp_path / "tools.py", REFUND_TOOLS)
    code, out, _ = sd(["eval", "refund.sd", "--model", "test", "--tools", "tools.py", "--approve", "all"], tmp_path)
    assert (code, out) == (0, (
        "refund.sd · test\n"
        "  ✓ refunded  1/1  100 %  [21–100 %]  $0.0000  N s\n"
        "test: 1/1 cases pass, 0 flaky, 1/1 runs, $0.0000, N s\n"
    ))  # fmt: skip
    code, out, _ = sd(["eval", "refund.sd", "--model", "test", "--tools", "tools.py"], tmp_path)
    assert code == 1
    assert out.splitlines()[-1] == (
        "a run paused for a tool call that needs approval (it failed): --approve all|none decides them"
    )
