"""One writer per journal: a second `sd batch` on the same output is refused, naming who holds it.

Batch A runs in this process (in a thread, its model held at a gate the test opens);
batch B is a separate `sd` process started while A is inside its first model call.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from cli_models import scripted
from cli_support import plain_environment, sd, use_model  # noqa: F401

GATE_S = 60  # only so a broken test cannot hang forever; never decides an order


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def sd_process(*args: Any, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "struckdown.cli", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=GATE_S, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.process  # the point: a second sd process meets the first one's lock
def test_a_second_batch_on_the_same_output_is_refused_and_names_the_holder(tmp_path: Path, use_model: Any) -> None:
    in_model = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    def reply(prompt: str, info: Any) -> Any:
        calls.append(prompt)
        in_model.set()
        assert release.wait(GATE_S), "the test never opened the gate"
        return "from A"

    use_model(scripted(reply))
    template = write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")
    rows = write(tmp_path / "rows.jsonl", '{"n": 0}\n{"n": 1}\n{"n": 2}\n')
    out = tmp_path / "out.csv"
    outcome: dict[str, Any] = {}
    first = threading.Thread(target=lambda: outcome.update(a=sd("batch", template, rows, "-o", out, "-j", "1")))
    first.start()
    try:
        assert in_model.wait(GATE_S)
        second = sd_process("batch", template, rows, "-o", out, "--model", "test", cwd=tmp_path)
    finally:
        release.set()
        first.join(GATE_S)
    assert second.returncode == 2, second.stderr
    journal = tmp_path / "out.journal.jsonl"
    last = second.stderr.strip().splitlines()[-1]
    holder = f"(pid {os.getpid()} on {socket.gethostname()}, since "
    assert last.startswith(f"error: {journal} is being written by another sd batch {holder}"), last
    assert last.endswith("): wait for it to finish or stop it (two batches on one output would run every row twice)")
    assert outcome["a"].exit_code == 0, outcome["a"].output
    assert sorted(calls) == ["Row 0", "Row 1", "Row 2"]  # A ran each row once; B ran none
    assert out.read_text(encoding="utf-8").splitlines() == ["n,answer", "0,from A", "1,from A", "2,from A"]
    assert not (tmp_path / "out.journal.lock").exists()


def test_a_resume_waits_for_no_one_once_the_holder_is_gone(tmp_path: Path, use_model: Any) -> None:
    """A lock file left by a holder that died (the kernel dropped its lock) does not block."""
    use_model(scripted(lambda prompt, info: "ok"))
    template = write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")
    rows = write(tmp_path / "rows.jsonl", '{"n": 0}\n')
    (tmp_path / "out.journal.lock").write_text(json.dumps({"pid": 999999, "host": "gone", "started": 0}) + "\n")
    result = sd("batch", template, rows, "-o", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out.journal.lock").exists()


@pytest.mark.process  # the point: two sd processes at once
def test_batches_on_different_outputs_run_side_by_side(tmp_path: Path, use_model: Any) -> None:
    in_model = threading.Event()
    release = threading.Event()

    def reply(prompt: str, info: Any) -> Any:
        in_model.set()
        assert release.wait(GATE_S)
        return "a"

    use_model(scripted(reply))
    template = write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")
    rows = write(tmp_path / "rows.jsonl", '{"n": 0}\n')
    outcome: dict[str, Any] = {}
    first = threading.Thread(target=lambda: outcome.update(a=sd("batch", template, rows, "-o", tmp_path / "a.csv")))
    first.start()
    try:
        assert in_model.wait(GATE_S)
        second = sd_process("batch", template, rows, "-o", tmp_path / "b.csv", "--model", "test", cwd=tmp_path)
    finally:
        release.set()
        first.join(GATE_S)
    assert second.returncode == 0, second.stderr
    assert outcome["a"].exit_code == 0


class FullDisk:
    """The journal's file object on a disk that fills after `room` writes: every later
    write (and the flush at close) raises ENOSPC, as a full disk does."""

    def __init__(self, real: Any, room: int) -> None:
        self.real, self.room = real, room

    def _full(self) -> OSError:
        import errno

        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, data: bytes) -> int:
        if self.room <= 0:
            self.pending = True
            raise self._full()
        self.room -= 1
        return int(self.real.write(data))

    def flush(self) -> None:
        if getattr(self, "pending", False):
            raise self._full()
        self.real.flush()

    def fileno(self) -> int:
        return int(self.real.fileno())

    def close(self) -> None:
        self.real.close()
        self.flush()


def test_a_full_disk_names_the_journal_and_exits_cleanly(tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 39 N19: ENOSPC while journaling is one `error:` line naming the journal and
    saying what is saved, exit 1, no traceback; the rows journaled before stay there."""
    from struckdown.batch import journal as journal_module

    opened = journal_module.Journal.__init__

    def on_a_small_disk(self: Any, path: Path, *, fresh: bool) -> None:
        opened(self, path, fresh=fresh)
        self._handle = FullDisk(self._handle, room=2)

    monkeypatch.setattr(journal_module.Journal, "__init__", on_a_small_disk)
    use_model(scripted(lambda prompt, info: "fine"))
    template = write(tmp_path / "t.sd", "Row {{ n }} [[answer]]\n")
    rows = write(tmp_path / "rows.jsonl", "".join(f'{{"n": {n}}}\n' for n in range(5)))
    out = tmp_path / "out.csv"
    result = sd("batch", template, rows, "-o", out, "-j", "1", "--no-cache")
    journal = tmp_path / "out.journal.jsonl"
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == (
        f"error: cannot write the batch journal {journal}: the disk is full (ENOSPC: No space left on device); "
        "2/5 rows are saved in it; free some space and run the same command with --resume"
    ), result.output
    assert [json.loads(line)["index"] for line in journal.read_text().splitlines()] == [0, 1]
    assert not out.exists()
    assert not (tmp_path / "out.journal.lock").exists()  # the lock went with the failed batch
    monkeypatch.undo()  # space freed
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "fine"))
    assert sd("batch", template, rows, "-o", out, "-j", "1", "--resume", "--no-cache").exit_code == 0
    # row 2 finished before the disk filled: its answer is in the effect journal (SPEC §25), which the
    # resumed row reuses (its request unchanged); rows 3 and 4 never ran
    assert sorted(prompts) == ["Row 3", "Row 4"]
    assert out.read_text().count("fine") == 5
