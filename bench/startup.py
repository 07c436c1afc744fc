"""(e) Start-up: fresh processes of `sd --help`, `sd check`, `sd run --model test` and
imports of struckdown, as CPU ratios to `python -c "import pydantic_ai"` (SPEC §28).

Each command runs in its own subprocess, the commands interleaved round by round (A B C
… then … C B A), median of N of each process's CPU time (user + system, read from
`getrusage(RUSAGE_CHILDREN)` around it). CPU time barely moves when other processes take
the cores, where wall times on our shared machines swing 2x; the floor runs in the same
rounds, so load that slows every process alike cancels in the ratio.

Bytecode: an installed wheel has its .pyc files compiled at install time, but an
editable checkout run with PYTHONDONTWRITEBYTECODE=1 (as on our machines) recompiles
every struckdown module on every start while pydantic-ai's .pyc files exist. To compare
like with like, the subprocesses write and read bytecode under a private
PYTHONPYCACHEPREFIX (in the temp directory, never in the source tree); the warm-up
round fills it.

`sd run` is measured in its steady state: the warm-up round parses the template (kept in
the cache folder, struckdown/syntax/stored.py) and stores the test model's answer, so the
measured rounds read both (docs/performance.md has a template never seen too).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import Row, median, ms, ratio_of, target_row

FLOOR = "import pydantic_ai"
#: (command, target CPU ratio to `import pydantic_ai`); None: an info row.
TARGETS: dict[str, float | None] = {
    "sd --help": 0.05,
    "sd check": 0.20,
    "sd run --model test": 1.15,
    "import struckdown.api": 1.10,
    "import struckdown": None,
}

#: A realistic small template (issue 45): a context variable and a typed (`bool`) slot besides free text.
TEMPLATE = (
    "Say hello to {{ name }} in one short sentence.\n\n[[greeting]]\n\n"
    "Is {{ name }} a common first name?\n\n[[bool:common]]\n"
)


def commands(workdir: Path) -> dict[str, list[str]]:
    python = sys.executable
    sd = str(Path(python).with_name("sd"))
    template = workdir / "one.sd"
    template.write_text(TEMPLATE, encoding="utf-8")
    return {
        FLOOR: [python, "-c", "import pydantic_ai"],
        "sd --help": [sd, "--help"],
        "sd check": [sd, "check", str(template)],
        "sd run --model test": [sd, "run", str(template), "--model", "test", "-c", "name=Ann"],
        "import struckdown.api": [python, "-c", "import struckdown.api"],
        "import struckdown": [python, "-c", "import struckdown"],
    }


def _env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "struckdown-bench-pycache")
    env["STRUCKDOWN_CACHE_DIR"] = str(workdir / "cache")
    env["COLUMNS"] = "100"  # `sd --help` as on a terminal (click wraps at 80 columns there)
    for name in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE"):
        env.pop(name, None)
    return env


def _cpu(command: list[str], env: dict[str, str]) -> float | None:
    """CPU seconds (user + system) of one run of `command`; None when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(command, capture_output=True, env=env, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(repeats: int) -> dict[str, float | None]:
    """Median CPU seconds per command; None when the command fails. A first round warms
    the bytecode and file caches and drops the commands that fail."""
    with tempfile.TemporaryDirectory(prefix="sd-bench-startup-") as tmp:
        workdir = Path(tmp)
        env, cmds = _env(workdir), commands(workdir)
        working = {name: cmd for name, cmd in cmds.items() if _cpu(cmd, env) is not None}
        times: dict[str, list[float]] = {name: [] for name in working}
        for round_ in range(repeats):
            names = list(working) if round_ % 2 == 0 else list(working)[::-1]
            for name in names:
                elapsed = _cpu(working[name], env)
                if elapsed is not None:
                    times[name].append(elapsed)
    return {name: (median(times[name]) if times.get(name) else None) for name in cmds}


async def run(quick: bool = False) -> list[Row]:
    repeats = 5 if quick else 9
    cpu = measure(repeats)
    floor = cpu[FLOOR]
    rows: list[Row] = []
    for name, target in TARGETS.items():
        value = cpu[name]
        case = f"e. {name} (CPU)"
        measured, floor_text = f"{ms(value)} CPU", f"{ms(floor)} CPU {FLOOR}"
        ratio = ratio_of(value, floor)
        note = f"median of {repeats}, interleaved" if value is not None else "the command failed"
        if target is None:
            rows.append(Row(case, measured, floor_text, ratio, "info", None, note))
        else:
            rows.append(target_row(case, measured, floor_text, ratio, target, note=note))
    return rows
