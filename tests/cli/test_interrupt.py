"""Ctrl-C during `sd run` ends the process at once, even while a blocking sync tool runs
(issue 24 item 8): exit 130, one line, no traceback, and the tool never gets to finish."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

TOOLS = '''
import time

def slow_write(note: str) -> str:
    """Write a note, slowly."""
    with open({started!r}, "w") as gate:  # a FIFO: the test reads it, so it knows the tool runs
        gate.write("1")
    time.sleep(3600)  # blocks its thread; the run is interrupted meanwhile
    pathlib.Path({effect!r}).write_text(note)
    return "written"
'''

MODEL = '''
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel

def factory():
    return FunctionModel(lambda messages, info: ModelResponse(parts=[ToolCallPart("slow_write", {"note": "hi"})]))
'''


def test_ctrl_c_ends_the_run_at_once_while_a_sync_tool_blocks(tmp_path: Path) -> None:
    started, effect = tmp_path / "started", tmp_path / "side_effect"
    os.mkfifo(started)
    (tmp_path / "tools.py").write_text(TOOLS.format(started=str(started), effect=str(effect)))
    (tmp_path / "stall_model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "t.sd").write_text("Write it [[a|use_tools=true]]\n")
    command = [sys.executable, "-m", "struckdown.cli", "run", "t.sd", "--tools", "tools.py",
               "--model", "stall_model:factory", "--no-stream", "--no-cache"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(started) as gate:  # blocks until the tool has started and written to it
            assert gate.read() == "1"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "interrupted"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not effect.exists()  # the process is gone: the tool can never write it now


def test_ctrl_c_ends_a_run_busy_rendering_a_heavy_template(tmp_path: Path) -> None:
    context = tmp_path / "context.json"
    os.mkfifo(context)  # the gate: sd blocks reading it until the test writes
    (tmp_path / "t.sd").write_text("{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}[[a]]\n")
    command = [sys.executable, "-m", "struckdown.cli", "run", "t.sd", "--context", "context.json", "--model", "test"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open(context, "w") as gate:
            gate.write("{}")
        # the run now renders for hours; wait until the process has used CPU in it
        stat = Path(f"/proc/{process.pid}/stat")
        start = int(stat.read_text().split()[13])
        while int(stat.read_text().split()[13]) < start + 100:  # a second of CPU (100 ticks) past the gate
            os.sched_yield()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert err.splitlines()[-1] == "interrupted" and "Traceback" not in err
