"""SPEC §29: a call of a write tool cut off mid-call with no reconcile hook is the user's
decision. `sd batch` marks its row `unknown` (exit 5) and keeps the journal until
`--resume --decide` settles it; a finished batch leaves a `finished` record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import plain_environment, sd, use_model  # noqa: F401, F811
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from struckdown.run.durable.effects import effect_id
from struckdown.run.durable.files import journal_key, signed

TOOLS = '''
import pathlib

LOG = pathlib.Path({log!r})


def refund(order: str) -> str:
    """Refund an order: moves money."""
    with LOG.open("a") as handle:
        handle.write(order + "\\n")
    return "refunded " + order
'''

JOB = "0123456789abcdef"


def refund_model(asked: list[str]) -> FunctionModel:
    """Asks for refund(order) of its row, then answers with what the tool returned."""

    def reply(messages: Any, info: Any) -> ModelResponse:
        prompt = messages[0].parts[-1].content
        order = prompt.split("order ")[1].split(".")[0]
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            asked.append(order)
            return ModelResponse(parts=[ToolCallPart("refund", {"order": order})])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

    return FunctionModel(reply)


def setup_job(tmp_path: Path, rows: int, cut_off: list[int], shard: bool = False) -> dict[str, Path]:
    """A job whose earlier run was killed in the refund of each row in `cut_off` (the
    effect journal holds their calls as started and never finished)."""
    paths = {"log": tmp_path / "effects.log", "tools": tmp_path / "tools.py", "t": tmp_path / "t.sd",
             "rows": tmp_path / "rows.jsonl", "out": tmp_path / "out.jsonl"}
    paths["tools"].write_text(TOOLS.format(log=str(paths["log"])))
    paths["t"].write_text("Refund order {{ order }}. [[reply|use_tools=true, max_iter=3]]\n")
    paths["rows"].write_text("".join(json.dumps({"order": f"R{i}"}) + "\n" for i in range(rows)))
    lines = [{"journal": "struckdown effects", "version": 1, "job": JOB}]
    for row in cut_off:
        effect = effect_id(JOB, row, "reply", "refund", {"order": f"R{row}"})
        lines.append({"effect": effect, "state": "started", "tool": "refund", "arguments": {"order": f"R{row}"},
                      "slot": "reply", "row": row})
    text = json.dumps(lines[0]) + "\n" + "".join(sign_record(line) for line in lines[1:])
    if shard:  # a --workers process was cut off: its started record is in its shard
        (tmp_path / "out.journal.effects.jsonl").write_text(json.dumps(lines[0]) + "\n")
        (tmp_path / "out.journal.effects.jsonl.worker1").write_text(text)
        return paths
    (tmp_path / "out.journal.effects.jsonl").write_text(text)
    return paths


def sign_record(entry: dict[str, Any]) -> str:
    """A record line as a killed run left it: signed with the test's state key."""
    return signed(journal_key(), JOB, json.dumps(entry).encode()).decode()


def batch(paths: dict[str, Path], *more: Any) -> Any:
    return sd("batch", paths["t"], paths["rows"], "-o", paths["out"], "--tools", paths["tools"], "--no-cache",
              "-j", "1", *more)


def effects(paths: dict[str, Path]) -> list[str]:
    return paths["log"].read_text().splitlines() if paths["log"].exists() else []


def outputs(paths: dict[str, Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in paths["out"].read_text().splitlines()]


def test_a_cut_off_call_leaves_its_row_unknown_until_decided(tmp_path: Path, use_model: Any) -> None:
    asked: list[str] = []
    use_model(refund_model(asked))
    paths = setup_job(tmp_path, 3, cut_off=[1])
    first = batch(paths, "--resume")
    assert first.exit_code == 5, first.output
    assert "1 row waits for a decision about a call whose outcome is unknown" in first.output
    assert ": 2 ok, 1 unknown" in first.output
    rows = outputs(paths)
    assert [r.get("reply") for r in rows] == ["done: refunded R0", None, "done: refunded R2"]
    assert rows[1]["_unknown"] == 'outcome unknown: did refund(order="R1") happen?' and "_error" not in rows[1]
    assert effects(paths) == ["R0", "R2"]  # the cut-off call never ran again, nor was it denied
    journal = (tmp_path / "out.journal.effects.jsonl").read_text()
    assert '"state": "started"' in journal and (tmp_path / "out.journal.jsonl").exists()  # kept

    again = batch(paths, "--resume")  # undecided: it still waits, nothing runs twice
    assert again.exit_code == 5 and effects(paths) == ["R0", "R2"]

    decided = batch(paths, "--resume", "--decide", "happened", "--row", "2")
    assert decided.exit_code == 0, decided.output
    assert effects(paths) == ["R0", "R2"]  # it happened: it does not run again
    assert outputs(paths)[1]["reply"] == "done: It happened (its result was not recorded)."
    assert json.loads((tmp_path / "out.journal.jsonl").read_text())["finished"] is True


@pytest.mark.parametrize(("decide", "log", "reply"), [
    ("not-happened", ["R0", "R1"], "done: refunded R1"),
    ("deny", ["R0"], "done: The user denied this call."),
])
def test_decide_runs_or_denies_the_call(tmp_path: Path, use_model: Any, decide: str, log: list[str],
                                        reply: str) -> None:
    use_model(refund_model([]))
    paths = setup_job(tmp_path, 2, cut_off=[1])
    assert batch(paths, "--resume").exit_code == 5
    result = batch(paths, "--resume", "--decide", decide)
    assert result.exit_code == 0, result.output
    assert effects(paths) == log and [r["reply"] for r in outputs(paths)][1] == reply


@pytest.mark.parametrize("decide", ["happened", "not-happened"])
def test_a_decision_settles_a_call_a_workers_shard_holds(tmp_path: Path, use_model: Any, decide: str) -> None:
    """The decision goes to the journal, the cut-off call is in a worker's shard: whichever
    is read first, the decision settles it (it used to stay unknown for ever)."""
    use_model(refund_model([]))
    paths = setup_job(tmp_path, 2, cut_off=[1], shard=True)
    assert batch(paths, "--resume").exit_code == 5
    result = batch(paths, "--resume", "--decide", decide)
    assert result.exit_code == 0, result.output
    assert effects(paths) == (["R0", "R1"] if decide == "not-happened" else ["R0"])
    again = batch(paths, "--resume")
    assert again.exit_code == 0 and "already finished: 2 rows" in again.output


def test_decide_needs_resume_and_a_known_answer(tmp_path: Path, use_model: Any) -> None:
    use_model(refund_model([]))
    paths = setup_job(tmp_path, 1, cut_off=[0])
    wrong = batch(paths, "--resume", "--decide", "maybe")
    assert wrong.exit_code == 2 and "--decide takes happened, not-happened or deny, not 'maybe'" in wrong.output
    alone = batch(paths, "--decide", "deny")
    assert alone.exit_code == 2 and "give it with --resume" in alone.output
    assert effects(paths) == []


def test_resume_of_a_finished_batch_runs_nothing(tmp_path: Path, use_model: Any) -> None:
    asked: list[str] = []
    use_model(refund_model(asked))
    paths = setup_job(tmp_path, 2, cut_off=[])
    assert batch(paths).exit_code == 0
    assert effects(paths) == ["R0", "R1"]
    assert json.loads((tmp_path / "out.journal.jsonl").read_text())["rows"] == 2
    again = batch(paths, "--resume")
    assert again.exit_code == 0, again.output
    assert f"already finished: 2 rows in {paths['out']}" in again.output
    assert effects(paths) == ["R0", "R1"] and asked == ["R0", "R1"]


def test_sd_run_journal_refuses_the_input_table(tmp_path: Path, use_model: Any) -> None:
    asked: list[str] = []
    use_model(refund_model(asked))
    paths = setup_job(tmp_path, 1, cut_off=[])
    table = tmp_path / "w.csv"
    table.write_text("order\nR1\n")
    refused = sd("run", paths["t"], "--set", "order=R1", "--tools", paths["tools"], "--journal", table, "--no-cache")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.strip().splitlines()[-1] == (
        f"error: journal {table} exists and is not a struckdown journal (line 1 is not a journal's header); "
        "give a new file (or one struckdown wrote as a journal)"
    )
    assert table.read_text() == "order\nR1\n" and asked == [] and effects(paths) == []


def test_a_batch_makes_no_scratch_folder_it_does_not_need(tmp_path: Path, use_model: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGKILL leaves whatever is in the temp folder while rows run: no empty `sd-batch-*`."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen: list[list[str]] = []

    def reply(messages: Any, info: Any) -> ModelResponse:
        seen.append(sorted(p.name for p in scratch.glob("sd-batch-*")))  # while the row runs
        return ModelResponse(parts=[TextPart("ok")])

    use_model(FunctionModel(reply))
    template = tmp_path / "t.sd"
    template.write_text("Say ok to {{ order }}. [[reply]]\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"order": "R1"}\n')
    assert sd("batch", template, rows, "-o", tmp_path / "out.jsonl", "--no-cache").exit_code == 0
    assert seen == [[]]


def test_sd_run_shows_a_replayed_call_as_such(tmp_path: Path, use_model: Any) -> None:
    use_model(refund_model([]))
    paths = setup_job(tmp_path, 1, cut_off=[])
    journal = tmp_path / "run.journal"
    args = ("run", paths["t"], "--set", "order=R1", "--tools", paths["tools"], "--journal", journal, "--no-cache",
            "--no-stream")
    first = sd(*args)
    assert first.exit_code == 0 and 'tool refund(order="R1") → refunded R1 (' in first.output
    again = sd(*args, "--rerun-from", "reply")
    assert again.exit_code == 0, again.output
    assert '[reply] tool refund(order="R1") → refunded R1 (replayed from the journal)' in again.output
    assert effects(paths) == ["R1"]
