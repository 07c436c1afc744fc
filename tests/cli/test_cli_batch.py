"""`sd batch`: inputs, output order and formats, the journal, --resume after a kill."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_models import last_prompt, scripted
from cli_support import plain_environment, runner, sd, use_model  # noqa: F401
from process_gates import fifo, wait_for_gate
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from finished_journal import finished

TESTS = Path(__file__).resolve().parents[1] / "support"
ROW_TEMPLATE = "Row {{ id }}: {{ text }} [[answer]]\n"


def row_of(prompt: str) -> int:
    match = re.search(r"Row (\d+)", prompt)
    assert match, prompt
    return int(match.group(1))


def answers_by_row(prompt: str, info: Any) -> str:
    return f"answer {row_of(prompt)}"


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "t.sd"
    path.write_text(ROW_TEMPLATE, encoding="utf-8")
    return path


def test_output_keeps_input_order_when_rows_finish_out_of_order(
    tmp_path: Path, template: Path, use_model: Any
) -> None:
    n = 5
    journal = tmp_path / "out.journal.jsonl"

    def journaled(row: int) -> bool:
        return journal.exists() and any(e["index"] == row for e in read_jsonl(journal))

    async def slower_for_earlier_rows(messages: list[Any], info: Any) -> ModelResponse:
        """The gate: a row answers once the row after it is in the journal (the loop
        only yields to the other rows; it never waits on the clock)."""
        row = row_of(last_prompt(messages))
        for _ in range(100_000):
            if row == n - 1 or journaled(row + 1):
                break
            await asyncio.sleep(0)
        return ModelResponse(parts=[TextPart(f"answer {row}")])

    use_model(FunctionModel(slower_for_earlier_rows))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": f"t{i}"} for i in range(n)])
    out = tmp_path / "out.jsonl"
    result = sd("batch", template, inputs, "-o", out, "-j", n, "--keep-journal")
    assert result.exit_code == 0, result.output
    finished = [e["index"] for e in read_jsonl(journal)]
    assert finished == list(reversed(range(n)))  # they really did finish out of order
    assert read_jsonl(out) == [{"id": i, "text": f"t{i}", "answer": f"answer {i}"} for i in range(n)]


def test_csv_round_trip(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: f"answer {row_of(prompt)}, \"quoted\"\nsecond line"))
    rows = [
        {"id": "0", "text": "plain", "note": "x"},
        {"id": "1", "text": "with, comma", "note": 'a "quote"'},
        {"id": "2", "text": "multi\nline ünïcode", "note": ""},
    ]
    source = tmp_path / "in.csv"
    with source.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["id", "text", "note"])
        writer.writeheader()
        writer.writerows(rows)
    out = tmp_path / "out.csv"
    assert sd("batch", template, source, "-o", out).exit_code == 0
    with out.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["id", "text", "note", "answer"]
        back = list(reader)
    assert back == [{**r, "answer": f"answer {r['id']}, \"quoted\"\nsecond line"} for r in rows]
    assert finished(tmp_path / "out.journal.jsonl")  # every row ok: the journal is its finished record


def test_failed_rows_carry_the_error_and_exit_1(tmp_path: Path, template: Path, use_model: Any) -> None:
    def flaky(prompt: str, info: Any) -> str:
        if row_of(prompt) == 1:
            raise ValueError("row one is cursed")
        return f"answer {row_of(prompt)}"

    use_model(scripted(flaky))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    out = tmp_path / "out.csv"
    result = sd("batch", template, inputs, "-o", out)
    assert result.exit_code == 1
    with out.open(newline="", encoding="utf-8") as handle:
        back = list(csv.DictReader(handle))
    assert [r["_error"] for r in back] == ["", "slot 'answer': ValueError: row one is cursed", ""]
    assert [r["answer"] for r in back] == ["answer 0", "", "answer 2"]
    assert "row 2: slot 'answer': ValueError: row one is cursed" in result.stderr
    assert "batch: 3 rows → " in result.stderr and "2 ok, 1 failed" in result.stderr
    journal = read_jsonl(tmp_path / "out.journal.jsonl")  # kept: --resume retries the failed row
    assert sorted((e["index"], e["ok"]) for e in journal) == [(0, True), (1, False), (2, True)]


def test_inputs_json_jsonl_text_files_and_stdin(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: prompt.split("|")[0].strip()))
    template = tmp_path / "t.sd"
    template.write_text("{{ input }} | [[answer]]\n", encoding="utf-8")
    (tmp_path / "a.json").write_text(json.dumps([{"input": "j1"}, {"input": "j2"}]), encoding="utf-8")
    write_jsonl(tmp_path / "b.jsonl", [{"input": "l1"}])
    (tmp_path / "c.txt").write_text("text file", encoding="utf-8")
    result = sd("batch", template, tmp_path / "a.json", tmp_path / "b.jsonl", tmp_path / "c.txt", "-", input='{"input": "s1"}\n')
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]  # default: JSONL on stdout
    assert [r["answer"] for r in rows] == ["j1", "j2", "l1", "text file", "s1"]
    assert rows[3] == {"input": "text file", "content": "text file", "source": str(tmp_path / "c.txt"), "filename": str(tmp_path / "c.txt"),
                       "basename": "c", "answer": "text file"}  # 0.18's columns of a text input


def test_xlsx_round_trip(tmp_path: Path, template: Path, use_model: Any) -> None:
    openpyxl = pytest.importorskip("openpyxl")
    use_model(scripted(lambda prompt, info: "=HYPERLINK(\"x\")" if row_of(prompt) == 1 else "plain"))
    book = openpyxl.Workbook()
    book.active.append(["id", "text"])
    book.active.append([0, "zero"])
    book.active.append([1, "one"])
    book.save(tmp_path / "in.xlsx")
    out = tmp_path / "out.xlsx"
    assert sd("batch", template, tmp_path / "in.xlsx", "-o", out).exit_code == 0
    sheet = openpyxl.load_workbook(out).active
    assert list(sheet.values) == [("id", "text", "answer"), (0, "zero", "plain"), (1, "one", '=HYPERLINK("x")')]
    assert sheet["C3"].data_type == "s"  # model text never becomes a formula


def test_progress_and_summary_are_plain_when_not_a_terminal(tmp_path: Path, template: Path, use_model: Any) -> None:
    use_model(scripted(answers_by_row))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    result = sd("batch", template, inputs, "-o", tmp_path / "out.json")
    assert result.exit_code == 0
    assert "\x1b[" not in result.output
    assert re.search(r"^batch: 3/3 rows, [\d.]+ rows/s$", result.stderr, re.M)
    assert re.search(r"^batch: 3 rows → .*out\.json: 3 ok · 3 requests · \d+ tokens · [\d.]+ s$", result.stderr, re.M)
    assert [r["answer"] for r in json.loads((tmp_path / "out.json").read_text())] == ["answer 0", "answer 1", "answer 2"]


def test_terminal_gets_a_progress_bar(tmp_path: Path, template: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    monkeypatch.setattr(
        "struckdown.cli.batch.make_console", lambda stream: Console(file=stream, force_terminal=True, width=120)
    )
    use_model(scripted(answers_by_row))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    result = sd("batch", template, inputs, "-o", tmp_path / "out.jsonl")
    assert result.exit_code == 0
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stderr)
    assert "3/3" in plain and "rows/s" in plain and "ETA" in plain
    assert "batch: 3 rows → " in plain


def test_resume_skips_rows_the_journal_holds(tmp_path: Path, template: Path, use_model: Any) -> None:
    called: list[int] = []

    def counting(prompt: str, info: Any) -> str:
        called.append(row_of(prompt))
        return f"answer {row_of(prompt)}"

    use_model(scripted(counting))
    rows = [{"id": i, "text": "x"} for i in range(4)]
    inputs = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert sd("batch", template, inputs, "-o", out, "--keep-journal", "--no-cache").exit_code == 0
    journal = tmp_path / "out.journal.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines()
    journal.write_text("\n".join(lines[:2]) + "\n" + lines[2][:10], encoding="utf-8")  # a crash mid-line
    done = {json.loads(line)["index"] for line in lines[:2]}
    # the rows cut off never finished: no answer of theirs in the effect journal either (SPEC §25 would reuse it)
    (tmp_path / "out.journal.effects.jsonl").unlink()
    called.clear()

    refused = sd("batch", template, inputs, "-o", out)
    assert refused.exit_code == 2 and "pass --resume" in refused.stderr and not called

    result = sd("batch", template, inputs, "-o", out, "--resume", "--no-cache")
    assert result.exit_code == 0, result.output
    assert sorted(called) == sorted(set(range(4)) - done)
    assert "resuming" in result.stderr and "2 of 4 rows done" in result.stderr
    assert [r["answer"] for r in read_jsonl(out)] == [f"answer {i}" for i in range(4)]


def test_resume_needs_an_output_file(tmp_path: Path, template: Path) -> None:
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": 0, "text": "x"}])
    result = sd("batch", template, inputs, "--resume", "--model", "test")
    assert result.exit_code == 2 and "--resume needs -o" in result.stderr


@pytest.mark.process  # the point: a real `sd batch` process killed mid-batch
def test_killed_batch_resumes_without_losing_or_repeating_rows(
    tmp_path: Path, template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 8
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": f"t{i}"} for i in range(n)])
    out, journal, calls = tmp_path / "out.jsonl", tmp_path / "out.journal.jsonl", tmp_path / "calls.txt"
    held = fifo(tmp_path / "held")  # the gate: the model writes to it when row 2 is in flight
    env = {"SD_TEST_CALLS": str(calls), "SD_TEST_HOLD": f"2:{held}"}
    pythonpath = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    model = ["--model", "cli_models:rows_held"]  # a `module:factory` model name
    args = ["batch", str(template), str(inputs), "-o", str(out), "-j", "1", "--no-cache", *model]
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", *args],
        env={**os.environ, **env, "PYTHONPATH": pythonpath, "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # With -j 1 one worker runs the rows in turn and journals each (fsync) before it
        # starts the next, so once row 2 is in flight rows 0 and 1 are on disk.
        assert wait_for_gate(held, process) == "held"
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=60)  # only a guard against hanging the suite; SIGKILL ends it at once
    done_before = {e["index"] for e in read_jsonl(journal)}
    assert done_before == {0, 1} and not out.exists()

    monkeypatch.setenv("SD_TEST_CALLS", str(calls))  # resume in-process, same model factory, nothing held
    monkeypatch.delenv("SD_TEST_HOLD", raising=False)
    monkeypatch.syspath_prepend(str(TESTS))
    resumed = sd(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "\x1b[" not in resumed.output
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == list(range(n))  # every row exactly once, in input order
    assert [r["answer"] for r in rows] == [f"answer {i}" for i in range(n)]
    made = Counter(int(line) for line in calls.read_text(encoding="utf-8").split())
    assert all(made[i] == 1 for i in done_before)  # rows finished before the kill never ran again
    assert set(made) == set(range(n))
    assert finished(journal)  # every row ok now


@pytest.mark.parametrize("change", ["model", "include", "tools"])
def test_resume_reruns_rows_when_the_job_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """A journaled row is reused only by the same job: another --model, an edited
    <include>d file or tools file makes every row run again, and the note says why. Within
    a row that runs again, a slot whose request is unchanged is answered from the effect
    journal (SPEC §25): the tools file's change reaches no slot here (none uses tools)."""
    called: list[int] = []
    first_run = [True]

    def counting(prompt: str, info: Any) -> str:
        row = row_of(prompt)
        called.append(row)
        if row == 1 and first_run[0]:
            raise RuntimeError("first run fails row 1")  # so the journal stays for --resume
        return f"answer {row}"

    monkeypatch.setattr("struckdown.models._from_string", lambda name, *args, **kwargs: scripted(counting, name=name))
    (tmp_path / "part.sd").write_text("Row {{ id }}: {{ text }}\n", encoding="utf-8")
    template = tmp_path / "t.sd"
    template.write_text('<include src="part.sd"/> [[answer]]\n', encoding="utf-8")
    tools = tmp_path / "tools.py"
    tools.write_text("def lookup(q: str) -> str:\n    return q\n", encoding="utf-8")
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    out = tmp_path / "out.jsonl"
    args = ["batch", template, inputs, "-o", out, "--no-cache", "--tools", tools, "-j", "1"]
    assert sd(*args, "--model", "first").exit_code == 1
    called.clear()
    first_run[0] = False
    model = "first"
    if change == "model":
        model = "second"
    elif change == "include":
        (tmp_path / "part.sd").write_text("Row {{ id }} (edited): {{ text }}\n", encoding="utf-8")
    else:
        tools.write_text("def lookup(q: str) -> str:\n    return q.upper()\n", encoding="utf-8")
    result = sd(*args, "--model", model, "--resume")
    assert result.exit_code == 0, result.output
    assert sorted(called) == ([1] if change == "tools" else [0, 1, 2])  # no row reused; no request for tools
    assert "2 rows whose input or job (template, includes, model, tools) changed run again" in result.stderr


def test_resume_reuses_rows_of_the_same_job(tmp_path: Path, template: Path, use_model: Any) -> None:
    called: list[int] = []
    first_run = [True]

    def counting(prompt: str, info: Any) -> str:
        called.append(row_of(prompt))
        if row_of(prompt) == 1 and first_run[0]:
            raise RuntimeError("first run fails row 1")
        return f"answer {row_of(prompt)}"

    use_model(scripted(counting))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    out = tmp_path / "out.jsonl"
    assert sd("batch", template, inputs, "-o", out, "--no-cache", "--model", "m", "-j", "1").exit_code == 1
    called.clear()
    first_run[0] = False
    assert sd("batch", template, inputs, "-o", out, "--no-cache", "--model", "m", "--resume").exit_code == 0
    assert called == [1]


def test_resume_reruns_rows_when_a_config_alias_points_somewhere_new(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 N17: `--model fast` is the same flag after `fast` moved to another model,
    but the answers are another model's: --resume reruns every row."""
    called: list[int] = []
    first_run = [True]

    def counting(prompt: str, info: Any) -> str:
        called.append(row_of(prompt))
        if row_of(prompt) == 1 and first_run[0]:
            raise RuntimeError("first run fails row 1")
        return f"answer {row_of(prompt)}"

    config = tmp_path / "struckdown.toml"
    # the model the alias leads to (the real resolution reads the config file too)
    monkeypatch.setattr("struckdown.models._from_string", lambda *args, **kwargs: scripted(counting, name=config.read_text()))
    monkeypatch.chdir(tmp_path)
    config.write_text('[models]\nfast = "openai-chat:gpt-4o-mini"\n', encoding="utf-8")
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }}: {{ text }} [[answer]]\n", encoding="utf-8")
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(3)])
    args = ["batch", template, inputs, "-o", tmp_path / "out.jsonl", "--no-cache", "--model", "fast", "-j", "1"]
    assert sd(*args).exit_code == 1
    first_run[0] = False
    called.clear()
    assert sd(*args, "--resume").exit_code == 0  # the same alias, the same target: row 1 only
    assert called == [1]
    first_run[0] = True
    called.clear()
    assert sd(*args).exit_code == 1
    first_run[0] = False
    config.write_text('[models]\nfast = "anthropic:claude-sonnet-4-5"\n', encoding="utf-8")
    os.utime(config, (1, 1))  # a new mtime whatever the clock's resolution
    called.clear()
    result = sd(*args, "--resume")
    assert result.exit_code == 0, result.output
    assert sorted(called) == [0, 1, 2]
    assert "2 rows whose input or job (template, includes, model, tools) changed run again" in result.stderr
