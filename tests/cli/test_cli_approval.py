"""Approval in the CLI (SPEC §12) on examples/refund_agent.sd: the terminal prompt,
`--approve all|none`, the default without a terminal, `--pause-to FILE` (exit 4),
`sd resume` (one run of it in a new process) and `sd batch --approve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd  # noqa: F401
from struckdown.approval.signing import sign_state

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TESTS = Path(__file__).resolve().parents[1] / "support"
TEMPLATE = EXAMPLES / "refund_agent.sd"
RUN = ["run", TEMPLATE, "--context", EXAMPLES / "refund_agent.json", "--tools", EXAMPLES / "refund_tools.py",
       "--model", "cli_models:refund_agent", "--no-cache"]
ALLOWED = "Order 5531: refunded 49.00 for order 5531"
PROMPT = 'Allow issue_refund(order_id="5531", amount=49.0)? [y/N/or type a reason] '


@pytest.fixture(autouse=True)
def wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The refund model's log of requests (one line each)."""
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("SD_TEST_CALLS", str(path))
    return path


def terminal(monkeypatch: pytest.MonkeyPatch, is_one: bool = True) -> None:
    monkeypatch.setattr("struckdown.cli.approval_cmd.stdin_is_terminal", lambda: is_one)


def answers(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record


@pytest.mark.parametrize(
    ("typed", "reply"),
    [("y\n", ALLOWED), ("\n", "Order 5531: The user denied this call."), ("over the limit\n", "Order 5531: over the limit")],
)
def test_on_a_terminal_sd_run_asks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, typed: str, reply: str) -> None:
    terminal(monkeypatch)
    result = sd(*RUN, "-o", tmp_path / "out.json", input=typed)
    assert result.exit_code == 0, result.output
    assert PROMPT in result.stdout
    assert answers(tmp_path / "out.json")["answers"]["reply"] == reply
    assert answers(tmp_path / "out.json")["answers"]["refunded"] is (reply == ALLOWED)


def test_approve_all_or_none_decides_every_call(tmp_path: Path) -> None:
    for flag, reply in (("all", ALLOWED), ("none", "Order 5531: The user denied this call.")):
        result = sd(*RUN, "--approve", flag, "-o", tmp_path / f"{flag}.json")
        assert result.exit_code == 0, result.output
        assert "Allow " not in result.stdout
        assert answers(tmp_path / f"{flag}.json")["answers"]["reply"] == reply
    assert sd(*RUN, "--approve", "some").exit_code == 2


def test_without_a_terminal_calls_are_denied_with_one_note(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal(monkeypatch, False)
    result = sd(*RUN)
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: no terminal")]
    assert notes == [
        'note: no terminal to ask whether to allow issue_refund(order_id="5531", amount=49.0): denied, as every '
        "call that needs approval will be (--approve all|none decides every call; --pause-to FILE saves the run "
        "to decide later)"
    ]
    assert "[reply] reply.1: denied (The user denied this call.)" in result.stdout


@pytest.mark.process  # the point: sd resume in a new process
def test_pause_to_exits_4_and_sd_resume_in_a_new_process_gives_the_inline_result(tmp_path: Path, calls: Path) -> None:
    inline = sd(*RUN, "--approve", "all", "-o", tmp_path / "inline.json")
    assert inline.exit_code == 0, inline.output
    calls.unlink()

    state = tmp_path / "refund.state.json"
    paused = sd(*RUN, "--pause-to", state, "-o", tmp_path / "paused.json")
    assert paused.exit_code == 4, paused.output
    assert "awaiting approval:\n  reply.1  issue_refund(order_id=\"5531\", amount=49.0)\n" in paused.stderr
    flags = f"--tools {(EXAMPLES / 'refund_tools.py').resolve()} --model cli_models:refund_agent"
    assert f"continue with: sd resume {state} {flags} --approve reply.1" in paused.stderr
    assert answers(tmp_path / "paused.json")["paused"] == [
        {"id": "reply.1", "slot": "reply", "tool_name": "issue_refund", "arguments": {"order_id": "5531", "amount": 49.0}}
    ]
    assert calls.read_text().split("\n")[:-1] == ["abusive", "reply 0"]
    calls.unlink()

    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "struckdown.cli", "resume", str(state), *flags.split(), "--approve", "reply.1", "-o",
         str(tmp_path / "resumed.json")],
        env={**os.environ, "PYTHONPATH": pythonpath}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "[reply] reply.1: allowed" in done.stdout
    assert calls.read_text().split("\n")[:-1] == ["reply 2", "refunded"]  # no guard, no asking request again
    assert answers(tmp_path / "resumed.json") == answers(tmp_path / "inline.json")


def test_sd_resume_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "s.json"

    def pause() -> str:  # a paused state is resumed once (SPEC §29): each resume below gets a new one
        assert sd(*RUN, "--pause-to", state).exit_code == 4
        return state.read_text()

    saved = pause()
    terminal(monkeypatch, False)
    missing = sd("resume", state, "--trust-state")
    assert missing.exit_code == 2
    assert "decide every paused call (reply.1 issue_refund(order_id=\"5531\", amount=49.0))" in missing.stderr
    unknown = sd("resume", state, "--trust-state", "--approve", "reply.7")
    assert unknown.exit_code == 2 and "no paused call has the id reply.7" in unknown.stderr
    denied = sd("resume", state, "--trust-state", "--deny", "reply.1=wrong order", "-o", tmp_path / "d.json")
    assert denied.exit_code == 0, denied.output
    assert answers(tmp_path / "d.json")["answers"]["reply"] == "Order 5531: wrong order"
    pause()
    assert sd("resume", state, "--trust-state", "--deny-all", "-o", tmp_path / "n.json").exit_code == 0
    assert answers(tmp_path / "n.json")["answers"]["reply"] == "Order 5531: The user denied this call."
    pause()
    assert sd("resume", state, "--trust-state", "--approve-all", "-o", tmp_path / "a.json").exit_code == 0
    assert answers(tmp_path / "a.json")["answers"]["reply"] == ALLOWED
    saved = pause()
    terminal(monkeypatch)
    asked = sd("resume", state, "--trust-state", "-o", tmp_path / "t.json", input="y\n")
    assert asked.exit_code == 0 and PROMPT in asked.stdout
    assert answers(tmp_path / "t.json")["answers"]["reply"] == ALLOWED
    assert state.read_text() == saved  # nothing paused again
    assert sd(*RUN, "--pause-to", state, "--approve", "all").exit_code == 2
    changed = tmp_path / "changed.sd"
    changed.write_text(TEMPLATE.read_text())
    data = json.loads(saved)
    data["template_path"] = str(changed)
    changed.write_text(TEMPLATE.read_text().replace("Was a refund issued?", "Refunded?"))
    state.write_text(json.dumps(sign_state(data)))  # as if the file had changed since the pause
    stale = sd("resume", state, "--trust-state", "--approve", "reply.1")
    assert stale.exit_code == 2 and f"{changed} changed since the run paused: line 16 was 'Was a refund issued?'" in stale.stderr


def test_a_paused_state_is_resumed_once(tmp_path: Path, calls: Path) -> None:
    state = tmp_path / "s.json"
    assert sd(*RUN, "--pause-to", state).exit_code == 4
    first = sd("resume", state, "--trust-state", "--approve", "reply.1")
    assert first.exit_code == 0, first.output
    assert calls.read_text().count("refunded") == 1
    second = sd("resume", state, "--trust-state", "--approve", "reply.1")
    assert second.exit_code == 2
    line = second.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {state}: this paused state (state_") and "was resumed already, by sd resume" in line
    assert calls.read_text().count("refunded") == 1  # the refund did not run twice


def test_a_resumed_run_that_fails_says_why_and_writes_its_answers(tmp_path: Path, calls: Path) -> None:
    state = tmp_path / "s.json"
    assert sd(*RUN, "--pause-to", state).exit_code == 4
    failed = sd("resume", state, "--trust-state", "--approve", "reply.1", "--max-cost", "0.000001",
                "--prices", write_prices(tmp_path), "-o", tmp_path / "out.json")
    assert failed.exit_code == 1, failed.output
    assert "the run ended without a result" not in failed.output
    last = failed.stderr.strip().splitlines()[-1]
    assert last == "error: slot 'reply': BudgetExceeded: run budget spent: $0.0590, over --max-cost 1e-06"
    assert "failed · 1 answer · 2 requests" in failed.output
    record = answers(tmp_path / "out.json")
    assert set(record) >= {"answers", "usage", "error"} and record["error"]
    assert record["usage"]["requests"] >= 1


def write_prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"scripted": {"input": 1000.0, "output": 1000.0}}))
    return path


def test_sd_batch_approve_all_or_none(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"customer_id": f"C-{i}", "message": "order 5531 broke"}) + "\n" for i in range(2)))
    replies, notes = {}, {}
    for flag in (None, "all"):
        out = tmp_path / f"out-{flag}.jsonl"
        args = ["batch", TEMPLATE, rows, "-o", out, "--tools", EXAMPLES / "refund_tools.py", "--model",
                "cli_models:refund_agent", "--no-cache", *(["--approve", flag] if flag else [])]
        result = sd(*args)
        assert result.exit_code == 0, result.output
        replies[flag] = [json.loads(line)["reply"] for line in out.read_text().splitlines()]
        notes[flag] = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert replies == {None: ["Order 5531: The user denied this call."] * 2, "all": [ALLOWED] * 2}
    # issue 40 item 5: the default denies, and says so with the count
    assert notes == {
        None: ["note: 2 tool calls that need approval were denied in 2 rows "
               "(--approve none is the default; --approve all allows them)"],
        "all": [],
    }


def test_sd_explain_shows_which_calls_wait_for_a_decision() -> None:
    result = sd("explain", TEMPLATE, "--tools", EXAMPLES / "refund_tools.py")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "Irreversible: only for eligible orders. @needs_approval" in text
    assert "calls of issue_refund wait for a person's decision (approve=, or a pause)" in text
