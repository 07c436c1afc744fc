"""`sd batch` in constant memory: inputs read lazily, rows journaled as they finish, the
output assembled from the journal (issue 22)."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import last_prompt, scripted
from test_cli_batch import ROW_TEMPLATE, answers_by_row, read_jsonl, row_of, write_jsonl


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "t.sd"
    path.write_text(ROW_TEMPLATE, encoding="utf-8")
    return path


ACTION_TEMPLATE = "Row {{ id }}: {{ text }} [[@set:answer|value={{ text }}]]\n"


def batch_peak(tmp_path: Path, n: int) -> int:
    """Bytes allocated at the batch's peak above what was live before it (tracemalloc:
    every allocation counted, the same on every run, unlike RSS)."""
    template = tmp_path / "action.sd"
    template.write_text(ACTION_TEMPLATE, encoding="utf-8")
    inputs = write_jsonl(tmp_path / f"in{n}.jsonl", [{"id": i, "text": f"ticket {i} " * 8} for i in range(n)])
    out = tmp_path / f"out{n}.csv"
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = sd("batch", template, inputs, "-o", out, "-j", "4", "--no-cache")
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").count("\n") == n + 1
    return peak


def test_peak_memory_does_not_grow_with_the_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test-sized RSS benchmark: 10x the rows, the same peak. The rows run an
    action (no model, so that tracemalloc stays fast), through everything else a
    row goes through: the inputs read three times, the batch, the journal, the
    output. Holding every row, its Result or its journal entry would add about a
    kilobyte per row. The batch's own full collection comes every 20 rows here (500
    in real batches), so the garbage of finished rows is bounded at this size too.
    (That no Result of a model slot is kept is test_batch_stream.py's.)"""
    from struckdown import heap

    monkeypatch.setattr(heap, "COLLECT_EVERY_ROWS", 20)
    batch_peak(tmp_path, 4)  # warm: imports, parse caches
    small = batch_peak(tmp_path, 20)
    big = batch_peak(tmp_path, 200)
    assert big <= 1.3 * small, (small, big)


def test_a_broken_input_line_stops_the_batch_before_any_model_call(
    tmp_path: Path, template: Path, use_model: Any
) -> None:
    called: list[int] = []
    use_model(scripted(lambda prompt, info: called.append(row_of(prompt)) or "ok"))
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i, "text": "x"}) + "\n" for i in range(50)) + "{oops\n")
    result = sd("batch", template, inputs, "-o", tmp_path / "out.jsonl")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {inputs}:51: invalid JSON:")
    assert called == []
    assert not (tmp_path / "out.journal.jsonl").exists() or not read_jsonl(tmp_path / "out.journal.jsonl")


def test_a_json_list_is_read_item_by_item(
    tmp_path: Path, template: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read in chunks of 16 characters, items and numbers cut at every place still come
    out whole; a broken item is named by line and column in the whole file."""
    from struckdown.batch.tables import JsonItems

    monkeypatch.setattr(JsonItems, "CHUNK", 16)
    use_model(scripted(answers_by_row))
    rows = [{"id": i, "text": "é" * (i % 5), "big": 12345678901234567890 + i} for i in range(12)]
    inputs = tmp_path / "in.json"
    inputs.write_text("\ufeff" + json.dumps(rows, indent=1), encoding="utf-8")
    result = sd("batch", template, inputs)
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {**row, "answer": f"answer {row['id']}"} for row in rows
    ]
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"id": 0, "text": "x"},\n  {"id": 1 "text": "y"}\n]\n', encoding="utf-8")
    result = sd("batch", template, broken)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == f"error: {broken}:3:12: invalid JSON: Expecting ',' delimiter"


def test_stdout_keeps_input_order_when_held_rows_go_to_a_temporary_file(
    tmp_path: Path, template: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without -o, a row waits for every earlier one; past HELD waiting rows they wait
    in a file. The gate: each row answers once every later row has been written out
    as waiting (the loop only yields; it never waits on the clock)."""
    from struckdown.cli import batch

    monkeypatch.setattr(batch._InOrder, "HELD", 2)
    n = 6
    offered: list[int] = []
    original = batch._InOrder.offer

    def offer(self: Any, index: int, row: dict[str, Any]) -> None:
        offered.append(index)
        original(self, index, row)

    monkeypatch.setattr(batch._InOrder, "offer", offer)

    async def later_rows_first(messages: list[Any], info: Any) -> ModelResponse:
        row = row_of(last_prompt(messages))
        for _ in range(100_000):
            if all(later in offered for later in range(row + 1, n)):
                break
            await asyncio.sleep(0)
        return ModelResponse(parts=[TextPart(f"answer {row}")])

    use_model(FunctionModel(later_rows_first))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "ü\x1b"} for i in range(n)])
    result = sd("batch", template, inputs, "-j", n)
    assert result.exit_code == 0, result.output
    assert offered == list(reversed(range(n)))  # they did finish last to first
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"id": i, "text": "ü\x1b", "answer": f"answer {i}"} for i in range(n)
    ]


def test_inputs_that_change_while_the_batch_runs_are_an_error_and_lose_nothing(
    tmp_path: Path, template: Path, use_model: Any
) -> None:
    """The output is assembled from the inputs read again: rows that are no longer the
    rows that ran stop it (exit 1) instead of pairing answers with other rows; the
    journal keeps what ran, and --resume runs only the rows that changed."""
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(4)])
    changed = [False]

    def reply(prompt: str, info: Any) -> str:
        if row_of(prompt) == 3 and not changed[0]:
            changed[0] = True
            write_jsonl(inputs, [{"id": i, "text": "y" if i == 1 else "x"} for i in range(4)])
        return f"answer {row_of(prompt)}"

    use_model(scripted(reply))
    out = tmp_path / "out.jsonl"
    result = sd("batch", template, inputs, "-o", out, "-j", "1", "--no-cache")
    assert result.exit_code == 1
    assert "the inputs changed while the batch ran (row 1 is not the row it was)" in result.stderr
    assert sorted(e["index"] for e in read_jsonl(tmp_path / "out.journal.jsonl")) == [0, 1, 2, 3]
    again = sd("batch", template, inputs, "-o", out, "--resume", "--no-cache")
    assert again.exit_code == 0, again.output
    assert "3 of 4 rows done" in again.stderr and "1 row whose input or job" in again.stderr
    assert [r["text"] for r in read_jsonl(out)] == ["x", "y", "x", "x"]


def test_rows_run_with_a_raised_young_collection_threshold_restored_after(
    tmp_path: Path, template: Path, use_model: Any
) -> None:
    """While the rows run the collector's first threshold is `ROWS_GC_THRESHOLD` (young
    collections walk every row in flight); after the batch, ended well or by an error,
    the thresholds are the caller's again."""
    from struckdown.heap import ROWS_THRESHOLD as ROWS_GC_THRESHOLD

    seen: list[tuple[int, int, int]] = []

    def answer(prompt: str, info: Any) -> str:
        seen.append(gc.get_threshold())
        if row_of(prompt) == 2:
            raise RuntimeError("row 2 fails")
        return f"answer {row_of(prompt)}"

    use_model(scripted(answer))
    inputs = write_jsonl(tmp_path / "in.jsonl", [{"id": i, "text": "x"} for i in range(4)])
    before = gc.get_threshold()
    gc.set_threshold(900, 11, 12)
    try:
        result = sd("batch", template, inputs, "-o", tmp_path / "out.jsonl", "-j", "2")
        after = gc.get_threshold()
    finally:
        gc.set_threshold(*before)
    assert result.exit_code == 1, result.output
    assert seen == [(ROWS_GC_THRESHOLD, 11, 12)] * 4
    assert after == (900, 11, 12)
    assert [row.get("_error") is not None for row in read_jsonl(tmp_path / "out.jsonl")] == [False, False, True, False]
