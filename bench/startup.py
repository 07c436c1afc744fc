"""(e) Start-up: fresh interpreters importing struckdown, and `sd --help`.

Each command runs in its own subprocess, the commands interleaved round by round,
median of N. `import struckdown` is lazy (PEP 562), so `import struckdown.api` (which
pulls in pydantic-ai) is measured too and compared with `import pydantic_ai` itself.

Bytecode: an installed wheel has its .pyc files compiled at install time, but an
editable checkout run with PYTHONDONTWRITEBYTECODE=1 (as on our machines) recompiles
every struckdown module on every start while pydantic-ai's .pyc files exist. To compare
like with like, the subprocesses write and read bytecode under a private
PYTHONPYCACHEPREFIX (in the temp directory, never in the source tree); the probing
round fills it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import Row, median, ratio_of, secs

SD_HELP_TARGET = 0.30
IMPORT_TARGET = 1.10


def commands() -> dict[str, list[str]]:
    python = sys.executable
    sd = Path(python).with_name("sd")
    return {
        "python -c pass": [python, "-c", "pass"],
        "import pydantic_ai": [python, "-c", "import pydantic_ai"],
        "import struckdown": [python, "-c", "import struckdown"],
        "import struckdown.api": [python, "-c", "import struckdown.api"],
        "sd --help": [str(sd), "--help"],
    }


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "struckdown-bench-pycache")
    return env


def _time(command: list[str]) -> float | None:
    env = _env()
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, env=env, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    elapsed = time.perf_counter() - started
    return elapsed if done.returncode == 0 else None


def measure(repeats: int) -> dict[str, float | None]:
    """Median seconds per command; None when the command fails (e.g. no CLI yet).

    A first round probes which commands work and warms the file cache; with
    `repeats=0` (quick mode) its timings are the result."""
    cmds = commands()
    for cmd in cmds.values():  # fills the bytecode cache
        _time(cmd)
    probe = {name: _time(cmd) for name, cmd in cmds.items()}
    working = {name: cmds[name] for name, elapsed in probe.items() if elapsed is not None}
    times: dict[str, list[float]] = {name: [] if repeats else [probe[name]] for name in working}  # type: ignore[misc]
    for round_ in range(repeats):
        names = list(working) if round_ % 2 == 0 else list(working)[::-1]
        for name in names:
            elapsed = _time(working[name])
            if elapsed is not None:
                times[name].append(elapsed)
    return {name: (median(times[name]) if times.get(name) else None) for name in cmds}


async def run(quick: bool = False) -> list[Row]:
    repeats = 0 if quick else 7
    t = measure(repeats)
    base, pai = t["python -c pass"], t["import pydantic_ai"]
    api, lazy, sd = t["import struckdown.api"], t["import struckdown"], t["sd --help"]
    api_ratio = ratio_of(api, pai)
    return [
        Row(
            case="e. sd --help",
            measured=secs(sd),
            floor=f"{secs(base)} python -c pass",
            ratio=ratio_of(sd, base),
            target=f"<= {SD_HELP_TARGET:.2f} s",
            passed=None if sd is None else sd <= SD_HELP_TARGET,
            note="" if sd is not None else "`sd --help` failed (CLI not available yet): n/a",
        ),
        Row(
            case="e. import struckdown.api",
            measured=secs(api),
            floor=f"{secs(pai)} import pydantic_ai",
            ratio=api_ratio,
            target=f"<= {IMPORT_TARGET:.2f}x",
            passed=api_ratio is not None and api_ratio <= IMPORT_TARGET,
        ),
        Row(
            case="e. import struckdown (lazy)",
            measured=secs(lazy),
            floor=f"{secs(base)} python -c pass",
            ratio=ratio_of(lazy, base),
            target="info",
            passed=None,
        ),
    ]
