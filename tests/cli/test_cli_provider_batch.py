"""`sd batch --provider-batch`: batches counted, progress and summary, the journal, --resume
after a kill while a batch was pending (pydantic-ai's in-memory batch API, in-process)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from batch_models import BatchScript
from cli_support import plain_environment, sd, use_model  # noqa: F401
from scripted import Call
from finished_journal import finished

TEMPLATE = "Row {{ id }} first [[a]]\nRow {{ id }} second [[b]]\n"


def answer(call: Call) -> str:
    return f"{call.last_user} ok"


def write_rows(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(n)), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "t.sd"
    path.write_text(TEMPLATE, encoding="utf-8")
    return path


def test_provider_batch_sends_rows_slot_by_slot_in_batches(tmp_path: Path, template: Path, use_model: Any) -> None:
    script = BatchScript(answer)
    use_model(script.model())
    out = tmp_path / "out.jsonl"
    result = sd("batch", template, write_rows(tmp_path, 10), "-o", out, "--provider-batch", "--batch-size", "5",
                "--no-cache")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert script.sizes == [5, 5, 5, 5] and script.outside == []  # 10 rows x 2 slots, 5 a batch
    assert [(r["a"], r["b"]) for r in read_jsonl(out)] == [
        (f"Row {i} first ok", f"Row {i} second ok") for i in range(10)
    ]
    lines = result.stderr.splitlines()
    assert "provider batches: 1 submitted, 1 pending, 0 done · 0 rows done" in lines  # progress
    assert any(line.startswith("provider batches: 4 submitted, 0 pending, 4 done · ") for line in lines)
    assert "provider batches: 4 submitted (5.0 requests each)" in lines  # the summary
    assert finished(tmp_path / "out.journal.jsonl")


def test_a_batch_killed_while_waiting_resumes_without_sending_a_request_again(
    tmp_path: Path, template: Path, use_model: Any
) -> None:
    script = BatchScript(answer)
    use_model(script.model())  # the same in-memory batches for the run and its resume

    def kill(batch_id: str) -> None:  # the first check of the first batch: a crash while it waits
        if batch_id == script.batch_ids[0] and script.checked.count(batch_id) == 1:
            raise KeyboardInterrupt

    script.on_check = kill
    inputs, out, journal = write_rows(tmp_path, 8), tmp_path / "out.jsonl", tmp_path / "out.journal.jsonl"
    args = ["batch", template, inputs, "-o", out, "--provider-batch", "--batch-size", "4", "--no-cache"]
    killed = sd(*args)
    assert killed.exit_code == 130, killed.output
    sent = [call.last_user for batch in script.batches for call in batch]
    assert sent and all("first" in prompt for prompt in sent)
    lines = read_jsonl(journal)
    waiting = {line["index"]: line["provider_batch"] for line in lines if "provider_batch" in line}
    assert len(waiting) == len(sent) and all(not line["ok"] for line in lines)
    assert all(entry["batch"]["id"] in script.batch_ids for r in waiting.values() for entry in r.values())

    script.on_check = None
    before = len(script.batches)
    resumed = sd(*args, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert f"{len(waiting)} rows have {len(sent)} requests in provider batches of the earlier run" in resumed.stderr
    sent_again = [call.last_user for batch in script.batches[before:] for call in batch]
    assert not set(sent) & set(sent_again)  # no new batch for a request already submitted
    asked = Counter(call.last_user for call in script.calls)
    assert len(asked) == 16 and set(asked.values()) == {1}  # every row answered exactly once
    assert [r["b"] for r in read_jsonl(out)] == [f"Row {i} second ok" for i in range(8)]
    assert f"{before} from the earlier run ({len(sent)} requests collected, not sent again)" in resumed.stderr
    assert finished(journal)


def test_a_failed_row_keeps_its_batch_requests_for_resume(tmp_path: Path, template: Path, use_model: Any) -> None:
    fail = {"on": True}

    def flaky(call: Call) -> str:
        if "Row 1 second" in call.last_user and fail["on"]:
            raise RuntimeError("provider exploded")
        return answer(call)

    script = BatchScript(flaky)
    use_model(script.model())
    inputs, out, journal = write_rows(tmp_path, 3), tmp_path / "out.jsonl", tmp_path / "out.journal.jsonl"
    args = ["batch", template, inputs, "-o", out, "--provider-batch", "--no-cache"]
    assert sd(*args).exit_code == 1
    (row,) = [line for line in read_jsonl(journal) if line["index"] == 1][-1:]
    assert not row["ok"] and "provider exploded" in row["error"]
    assert len(row["provider_batch"]) == 1  # the answered request; the failed one is sent again
    fail["on"] = False
    assert sd(*args, "--resume").exit_code == 0
    asked = Counter(call.last_user for call in script.calls)
    assert asked["Row 1 first"] == 1  # collected from its batch again, not sent again
    assert asked["Row 1 second"] == 2  # the failed request is sent again


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--batch-wait", "5"], "--batch-wait is for --provider-batch"),
        (["--batch-size", "5"], "--batch-size is for --provider-batch"),
        (["--provider-batch", "--engine", "dask"], "cannot be combined with --engine dask"),
    ],
)
def test_provider_batch_flags(tmp_path: Path, template: Path, extra: list[str], message: str) -> None:
    result = sd("batch", template, write_rows(tmp_path, 1), "--model", "test", *extra)
    assert result.exit_code == 2 and message in result.stderr


def test_a_model_without_a_batch_api_is_refused_before_any_row(tmp_path: Path, template: Path, use_model: Any) -> None:
    from pydantic_ai.models.function import FunctionModel

    class NoBatches(FunctionModel):
        @property
        def batch_max_requests(self) -> int | None:
            return None

    calls: list[Any] = []
    use_model(NoBatches(lambda messages, info: calls.append(messages)))
    result = sd("batch", template, write_rows(tmp_path, 2), "--provider-batch")
    assert result.exit_code != 0 and "batch API" in result.stderr and not calls
