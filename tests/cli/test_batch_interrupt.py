"""Ctrl-C during `sd batch` ends the process at once, even while a blocking sync tool
runs (issue 24 item 8): exit 130, one line that says where the finished rows are, no
traceback; the finished rows are in the journal and the blocked tool never finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from process_gates import BLOCKING_TOOLS, fifo, wait_for_gate

pytestmark = pytest.mark.process  # a real sd process (.ci/run's process stage)

MODEL = '''
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

def answer(messages, info):
    prompt = str(messages[0].parts[-1].content)
    if "row 0" in prompt:
        return ModelResponse(parts=[TextPart("done")])
    return ModelResponse(parts=[ToolCallPart("slow_write", {"note": prompt})])

def factory():
    return FunctionModel(answer)
'''


def test_ctrl_c_ends_a_batch_at_once_and_the_finished_rows_are_journaled(tmp_path: Path) -> None:
    started, effect = fifo(tmp_path / "started"), tmp_path / "side_effect"
    (tmp_path / "tools.py").write_text(BLOCKING_TOOLS.format(started=str(started), effect=str(effect)))
    (tmp_path / "stall_model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "t.sd").write_text("Do row {{ n }} [[a|use_tools=true]]\n")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(3)))
    command = [sys.executable, "-m", "struckdown.cli", "batch", "t.sd", "rows.jsonl", "-o", "out.jsonl", "-j", "1",
               "--tools", "tools.py", "--model", "stall_model:factory", "--no-cache"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_gate(started, process) == "1"  # row 1's tool has started and blocks now
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    journal = tmp_path / "out.journal.jsonl"
    assert err.splitlines()[-1].endswith(
        f"error: interrupted: 1/3 rows are saved in {journal.name}; run the same command with --resume"
    )
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["index"], e["ok"], e["answers"]) for e in lines] == [(0, True, {"a": "done"})]
    assert not effect.exists() and not (tmp_path / "out.jsonl").exists()


@pytest.mark.cluster
def test_ctrl_c_with_workers_prints_no_dask_tracebacks(tmp_path: Path) -> None:
    """Issue 39 N13: Ctrl-C at a terminal signals the whole process group, Dask's worker
    processes too, and each printed a KeyboardInterrupt (and a CommClosedError) traceback
    under the one-line message. Now they ignore it and `sd` stops them in order."""
    started, effect = fifo(tmp_path / "started"), tmp_path / "side_effect"
    (tmp_path / "tools.py").write_text(BLOCKING_TOOLS.format(started=str(started), effect=str(effect)))
    (tmp_path / "stall_model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "t.sd").write_text("Do row {{ n }} [[a|use_tools=true]]\n")
    # one row that blocks (two would both write the gate, and the test could read "11")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"n": n}) + "\n" for n in range(2)))
    command = [sys.executable, "-m", "struckdown.cli", "batch", "t.sd", "rows.jsonl", "-o", "out.jsonl", "-j", "2",
               "--workers", "2", "--tools", "tools.py", "--model", "stall_model:factory", "--no-cache"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, which the test's Ctrl-C reaches whole
    )  # fmt: skip
    try:
        assert wait_for_gate(started, process) == "1"  # a worker's tool has started and blocks now
        os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        out, err = process.communicate(timeout=120)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "CommClosedError" not in err, err
    assert err.splitlines()[-1].startswith("error: interrupted: ")
    assert err.splitlines()[-1].endswith("rows are saved in out.journal.jsonl; run the same command with --resume")
    assert not effect.exists()
