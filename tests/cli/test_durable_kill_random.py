"""SPEC §29 under fire: `sd run --journal`, `sd batch` and `sd batch --workers 2` killed
(SIGKILL) at seeded random points, with a write tool without a reconcile hook that logs
each effect, then resumed or decided as the docs say (a call cut off mid-call is the
user's decision: `sd resume --happened/--approve`, `sd batch --resume --decide … --row N`).
Afterwards every effect happened exactly once, none was lost, and every row is in the
output exactly once. The kill points are gates (the effect log reaching a line, the
journal's `finished` record appearing), never a fixed sleep: a few kills each, seeded."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # real sd processes (.ci/run's process stage)

ROWS = 5

MODEL = '''
import re

from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel


def answer(messages, info):
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    order = re.findall(r"order (R[0-9]+)", str(prompts[-1]))[-1]
    returns = [p for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("refund", {"order": order})])
    return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])


def factory():
    return FunctionModel(answer)
'''

TOOLS = '''
import os


def refund(order: str) -> str:
    """Refund an order: moves money (logged, one write per effect)."""
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (order + "\\n").encode())
    finally:
        os.close(fd)
    return "refunded " + order
'''


def effects(folder: Path) -> list[str]:
    path = folder / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def setup(folder: Path, template: str) -> dict[str, str]:
    (folder / "kill_model.py").write_text(textwrap.dedent(MODEL))
    (folder / "tools.py").write_text(TOOLS.format(log=str(folder / "effects.log")))
    (folder / "t.sd").write_text(template)
    (folder / "rows.jsonl").write_text("".join(json.dumps({"order": f"R{i}"}) + "\n" for i in range(ROWS)))
    return {**os.environ, "PYTHONPATH": str(folder), "STRUCKDOWN_CACHE_DIR": str(folder / "cache")}


def sd(*args: str) -> list[str]:
    return [sys.executable, "-m", "struckdown.cli", *args]


def kill_when(process: subprocess.Popen[str], ready: "callable[[], bool]") -> bool:  # type: ignore[valid-type]
    """SIGKILL the process (and its --workers) as soon as `ready()` holds; False when it ended first."""
    while process.poll() is None:
        if ready():
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=60)  # only a guard against hanging the suite
            return True
        time.sleep(0.002)  # polling the gate's file, not a deadline
    process.communicate(timeout=60)
    return False


def run(command: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def gate(folder: Path, rng: random.Random) -> "callable[[], bool]":  # type: ignore[valid-type]
    """A seeded kill point: after the k-th effect (landing anywhere around it, in the tool,
    before its `done` line, in the next row), or in the batch's finish."""
    if rng.random() < 0.3:
        journal = folder / "out.journal.jsonl"
        return lambda: journal.exists() and journal.read_bytes().startswith(b'{"finished"')
    k = rng.randint(1, ROWS)
    return lambda: len(effects(folder)) >= k


@pytest.mark.parametrize(("workers", "seed"), [(None, 1), (None, 2), (None, 3), (2, 2)])
def test_a_batch_killed_at_random_points_makes_each_effect_once(tmp_path: Path, seed: int,
                                                                workers: int | None) -> None:
    rng = random.Random(seed * 7919 + (workers or 0))
    env = setup(tmp_path, "Refund order {{ order }}. [[reply|use_tools=true, max_iter=3]]\n")
    command = sd("batch", "t.sd", "rows.jsonl", "-o", "out.jsonl", "-j", "2", "--tools", "tools.py",
                 "--model", "kill_model:factory", "--no-cache", *(["--workers", str(workers)] if workers else []))
    for _ in range(2):  # two kills, each at its own point
        process = subprocess.Popen(command + (["--resume"] if (tmp_path / "out.journal.jsonl").exists() else []),
                                   cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)
        kill_when(process, gate(tmp_path, rng))
    for _ in range(ROWS + 2):  # resume, deciding each row whose call was cut off as the log says
        done = run(command + ["--resume"], tmp_path, env)
        if done.returncode == 0:
            break
        assert done.returncode == 5, done.stderr[-3000:]
        out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        row = next(i for i, r in enumerate(out) if r.get("_unknown"))
        happened = out[row]["order"] in effects(tmp_path)
        decided = run(command + ["--resume", "--decide", "happened" if happened else "not-happened",
                                 "--row", str(row + 1)], tmp_path, env)
        assert decided.returncode in (0, 5), decided.stderr[-3000:]
        if decided.returncode == 0:
            break
    log = Counter(effects(tmp_path))
    assert log == Counter({f"R{i}": 1 for i in range(ROWS)}), log  # none twice, none lost
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["order"] for r in rows] == [f"R{i}" for i in range(ROWS)]  # none lost or duplicated
    assert all(str(r.get("reply")).startswith("done: ") for r in rows), rows
    again = run(command + ["--resume"], tmp_path, env)
    assert again.returncode == 0 and "already finished: 5 rows in out.jsonl" in again.stderr
    assert Counter(effects(tmp_path)) == log


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sd_run_killed_at_random_points_makes_each_effect_once(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    template = "".join(f"Refund order R{i}. [[s{i}|use_tools=true, max_iter=3]]\n" for i in range(3))
    env = setup(tmp_path, template)
    command = sd("run", "t.sd", "--journal", "run.journal", "--tools", "tools.py", "--model", "kill_model:factory",
                 "--no-cache", "--no-stream", "--json")
    k = rng.randint(1, 3)
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    assert kill_when(process, lambda: len(effects(tmp_path)) >= k), "the run ended before its kill point"
    state = tmp_path / "s.json"
    for _ in range(4):
        done = run(command + ["--pause-to", str(state)], tmp_path, env)
        if done.returncode == 0:
            break
        assert done.returncode == 4, done.stderr[-3000:]
        request = json.loads(state.read_text())["requests"][0]
        assert request["kind"] == "unknown_outcome" and "outcome unknown: did refund(order=" in done.stderr
        decision = ["--happened", request["id"]] if request["arguments"]["order"] in effects(tmp_path) else \
            ["--approve", request["id"]]
        resumed = run(sd("resume", str(state), *decision, "--tools", "tools.py", "--model", "kill_model:factory",
                         "--json"), tmp_path, env)
        assert resumed.returncode in (0, 4), resumed.stderr[-3000:]
    assert Counter(effects(tmp_path)) == Counter({"R0": 1, "R1": 1, "R2": 1})
    final = run(command, tmp_path, env)
    assert final.returncode == 0, final.stderr[-3000:]
    assert json.loads(final.stdout) == {f"s{i}": f"done: refunded R{i}" for i in range(3)} or all(
        value.startswith("done: ") for value in json.loads(final.stdout).values()
    )
    assert Counter(effects(tmp_path)) == Counter({"R0": 1, "R1": 1, "R2": 1})
