"""Ctrl-C during `sd run` ends the process at once, even while a blocking sync tool runs
(issue 24 item 8): exit 130, one line, no traceback, and the tool never gets to finish.

Real processes (marker `process`): the point is the signal reaching a real `sd`. The
child tells the test through a FIFO when it is inside the blocking part; no test
waits on the clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from process_gates import BLOCKING_TOOLS, fifo, wait_for_gate

pytestmark = pytest.mark.process

MODEL = '''
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel

def factory():
    return FunctionModel(lambda messages, info: ModelResponse(parts=[ToolCallPart("slow_write", {"note": "hi"})]))
'''


def test_ctrl_c_ends_the_run_at_once_while_a_sync_tool_blocks(tmp_path: Path) -> None:
    started, effect = fifo(tmp_path / "started"), tmp_path / "side_effect"
    (tmp_path / "tools.py").write_text(BLOCKING_TOOLS.format(started=str(started), effect=str(effect)))
    (tmp_path / "stall_model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "t.sd").write_text("Write it [[a|use_tools=true]]\n")
    command = [sys.executable, "-m", "struckdown.cli", "run", "t.sd", "--tools", "tools.py",
               "--model", "stall_model:factory", "--no-stream", "--no-cache"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_gate(started, process) == "1"  # the tool has started and blocks now
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "interrupted"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not effect.exists()  # the process is gone: the tool can never write it now


# Runs `sd` as a host that lifted the work limit (struckdown.render.MAX_STEPS, where there
# is one), so the loops run for hours, with one change for the test: the sandbox's `range`
# writes `busy` into the FIFO the first time the inner loop calls it, so the test knows
# the render is under way.
BUSY_SD = """
import runpy, sys
import jinja2.sandbox as sandbox
import struckdown.render as render
render.MAX_STEPS = 10**15
real_range, seen = sandbox.safe_range, []
def gated_range(*args):
    seen.append(args)
    if len(seen) == 2:  # the outer loop's range, then the first inner one: rendering now
        with open({gate!r}, "w") as gate:
            gate.write("busy")
    return real_range(*args)
sandbox.safe_range = gated_range
sys.argv = ["sd", "run", "t.sd", "--model", "test"]
runpy.run_module("struckdown.cli", run_name="__main__")
"""


def test_ctrl_c_ends_a_run_busy_rendering_a_heavy_template(tmp_path: Path) -> None:
    busy = fifo(tmp_path / "busy")
    (tmp_path / "t.sd").write_text("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}[[a]]\n")
    command = [sys.executable, "-c", BUSY_SD.format(gate=str(busy))]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_gate(busy, process) == "busy"  # the run now renders for hours
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err


# Issue 40 item 18: slot a answers, slot b never does (a long answer on a slow model); the model
# writes `waiting` into the FIFO once b's request is under way.
SLOW_SECOND = '''
import asyncio
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage
from pydantic_ai.models.function import FunctionModel

async def reply(messages, info):
    if len(messages) > 1:  # slot b: tell the test, then never answer
        with open({gate!r}, "w") as gate:
            gate.write("waiting")
        await asyncio.Event().wait()
    return ModelResponse(parts=[TextPart("first answer")], usage=RequestUsage(input_tokens=7, output_tokens=2))

def factory():
    return FunctionModel(reply, model_name="slow")
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_still_writes_o_with_the_answers_and_usage_so_far(tmp_path: Path, signum: int) -> None:
    import json

    waiting = fifo(tmp_path / "waiting")
    (tmp_path / "slow_model.py").write_text(textwrap.dedent(SLOW_SECOND.format(gate=str(waiting))))
    (tmp_path / "t.sd").write_text("First [[a]]\n\nSecond [[b]]\n")
    out = tmp_path / "out.json"
    command = [sys.executable, "-m", "struckdown.cli", "run", "t.sd", "--model", "slow_model:factory", "--no-stream",
               "--no-cache", "-o", str(out)]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_gate(waiting, process) == "waiting"
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err
    record = json.loads(out.read_text())
    assert record["answers"] == {"a": "first answer"}
    assert record["interrupted"] is True and record["error"] == "interrupted"
    assert record["usage"]["requests"] == 1 and record["usage"]["input_tokens"] == 7
