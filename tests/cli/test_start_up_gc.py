"""`sd run` pauses the cyclic garbage collector while it starts up and freezes the
start-up heap at the run's first event (struckdown/heap.py, SPEC §28)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

#: loaded at interpreter start (sitecustomize): the collector's state at exit
SITE = """
import atexit, gc, json, os

SEEN = {"built": None, "requests": []}


def state():
    return [gc.isenabled(), gc.get_freeze_count() > 0]


atexit.register(lambda: open(os.environ["GC_OUT"], "w").write(json.dumps({**SEEN, "exit": state()})))
"""

#: a model factory recording the collector's state when the model is built and at each request
PROBE = """
import os
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from sitecustomize import SEEN, state


def answer(messages, info):
    SEEN["requests"].append(state())
    return ModelResponse(parts=[TextPart("hi")])


def model():
    SEEN["built"] = state()
    if os.environ.get("GC_FAIL"):
        raise RuntimeError("no model today")
    return FunctionModel(answer)
"""


def run(tmp_path: Path, *args: str, fail: bool = False) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    (tmp_path / "sitecustomize.py").write_text(SITE)
    (tmp_path / "gcprobe.py").write_text(PROBE)
    template = tmp_path / "t.sd"
    template.write_text("One [[a]]\n\nTwo [[b]]\n")
    out = tmp_path / "gc.json"
    env = {
        "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path),
        "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache"), "GC_OUT": str(out), **({"GC_FAIL": "1"} if fail else {}),
    }
    code = "import sys; sys.argv = ['sd', *sys.argv[1:]]; from struckdown.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", code, "run", str(template), "--model", "gcprobe:model", "--no-stream", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    return done, json.loads(out.read_text())


def test_the_collector_waits_for_the_first_event_then_runs_without_the_start_up_heap(tmp_path: Path) -> None:
    done, seen = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["a: hi", "b: hi"]
    assert seen["built"] == [False, False]  # start-up: paused, nothing frozen yet
    requests = seen["requests"]
    assert isinstance(requests, list) and len(requests) == 2
    assert requests[1] == [True, True]  # after the first event: on, the start-up heap frozen
    assert seen["exit"] == [True, True]


def test_an_error_event_settles_too(tmp_path: Path) -> None:
    done, seen = run(tmp_path, fail=True)
    assert done.returncode == 1 and "no model today" in done.stderr
    assert seen["built"] == [False, False] and seen["requests"] == []
    assert seen["exit"] == [True, True]


def test_an_error_before_the_run_turns_the_collector_on_again(tmp_path: Path) -> None:
    done, seen = run(tmp_path, "--stop-at", "nope")
    assert done.returncode == 2 and "--stop-at 'nope' is not a slot" in done.stderr
    assert seen == {"built": None, "requests": [], "exit": [True, False]}  # on again, nothing frozen


def test_a_command_line_left_to_typer_runs_with_the_collector_on(tmp_path: Path) -> None:
    done, seen = run(tmp_path, "--retries", "1")  # a number flag: typer checks its range (fast_run.py)
    assert done.returncode == 0, done.stderr
    assert seen["built"] == [True, False] and seen["exit"] == [True, False]
