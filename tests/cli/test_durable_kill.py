"""SPEC §25: `sd run --journal` killed (SIGKILL) in a write tool, before or after its side
effect; the run again with the same journal settles the call through the tool's reconcile
hook and the effect happens exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from finished_journal import only_finished_journal
from process_gates import fifo, wait_for_gate

pytestmark = pytest.mark.process  # a real sd process (.ci/run's process stage)

MODEL = '''
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import DeltaToolCall, FunctionModel

def answer(messages, info):
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("refund", {"order": "R7"})])
    return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

async def stream(messages, info):
    part = answer(messages, info).parts[0]
    if isinstance(part, TextPart):
        yield part.content
    else:
        yield {0: DeltaToolCall(part.tool_name, part.args_as_json_str(), tool_call_id="call_refund")}

def factory():
    return FunctionModel(answer, stream_function=stream)
'''

#: The refund appends a line to the bank's ledger (the side effect); with GATE set it tells
#: the test through that FIFO where it is (`before` or `after` the effect) and blocks there.
TOOLS = '''
import os
import pathlib
import time

import struckdown as sd
from pydantic_ai import RunContext

LEDGER = pathlib.Path({ledger!r})

def _gate(point):
    if os.environ.get("GATE_AT") == point:
        with open(os.environ["GATE"], "w") as gate:
            gate.write(point)
        time.sleep(3600)  # the test kills the process here

def look_up(effect_id, arguments):
    with open({asked!r}, "a") as asked:
        asked.write(effect_id + "\\n")
    lines = LEDGER.read_text().splitlines() if LEDGER.exists() else []
    return "refunded " + arguments["order"] if effect_id in lines else None

@sd.effect(reconcile=look_up)
def refund(ctx: RunContext, order: str) -> str:
    """Refund an order. Moves money."""
    _gate("before")
    with LEDGER.open("a") as ledger:
        ledger.write(ctx.effect_id + "\\n")
    _gate("after")
    return "refunded " + order
'''


COMMANDS = {
    "run": ["run", "t.sd", "--journal", "run.journal", "--json"],
    "batch": ["batch", "t.sd", "rows.jsonl", "-o", "out.jsonl", "-j", "1"],  # its journal beside out.jsonl
}


@pytest.mark.parametrize("point", ["before", "after"])
@pytest.mark.parametrize("how", ["run", "batch"])
def test_a_killed_run_settles_its_effect_exactly_once(tmp_path: Path, point: str, how: str) -> None:
    ledger, asked = tmp_path / "ledger", tmp_path / "asked"
    (tmp_path / "tools.py").write_text(TOOLS.format(ledger=str(ledger), asked=str(asked)))
    (tmp_path / "kill_model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "t.sd").write_text("Refund order R7. [[reply|use_tools=true, max_iter=3]]\n")
    (tmp_path / "rows.jsonl").write_text('{"n": 0}\n{"n": 1}\n')
    command = [sys.executable, "-m", "struckdown.cli", *COMMANDS[how],
               "--tools", "tools.py", "--model", "kill_model:factory", "--no-cache"]  # fmt: skip
    gate = fifo(tmp_path / "gate")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "GATE": str(gate), "GATE_AT": point}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_gate(gate, process) == point
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)  # only a guard against hanging the suite
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    env.pop("GATE_AT")
    if how == "batch":
        command.append("--resume")
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    effects = ledger.read_text().splitlines()
    if how == "run":
        assert '"reply": "done: refunded R7"' in again.stdout
        assert len(effects) == 1 and effects[0].startswith("eff_")  # exactly once, under its effect id
        assert asked.read_text().splitlines() == effects  # the hook was asked about that very call
        third = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert third.returncode == 0 and ledger.read_text().splitlines() == effects
        assert asked.read_text().splitlines() == effects  # done now: answered from the journal, nobody asked
        return
    # the batch: row 0 was killed in its call (settled by the hook), row 1 ran after the resume
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [row["reply"] for row in rows] == ["done: refunded R7", "done: refunded R7"]
    assert len(effects) == 2 and len(set(effects)) == 2  # one effect per row, each once
    assert asked.read_text().splitlines() == effects[:1]
    assert only_finished_journal(tmp_path)  # every row done: the journal is its finished record
