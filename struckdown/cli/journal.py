"""The batch journal: one JSON line per finished row, flushed and fsynced at once.

A line is `{"index", "ok", "answers", "error", "usage", "halted", "input_hash",
"template_hash"}`, plus `"provider_batch"` (the row's requests waiting in provider
batches, written when a batch is created, see cli/provider_batch.py); the last line for
an index wins. The hashes let `--resume`
skip only rows whose input and template are unchanged. `JournalLock` keeps a
second batch off a journal that one is writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import CliError
from .text import json_text


def journal_path(output: Path) -> Path:
    """`out.csv` → `out.journal.jsonl`, beside the output."""
    return output.with_name(f"{output.stem}.journal.jsonl")


def content_hash(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_journal(path: Path) -> tuple[dict[int, dict[str, Any]], int]:
    """Entries by row index (last write wins) and the number of unreadable lines
    (a line cut short by a crash is one)."""
    entries: dict[int, dict[str, Any]] = {}
    bad = 0
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        return entries, 0
    except OSError as exc:
        raise CliError(f"cannot read journal {path}: {exc}") from None
    with handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                entries[int(entry["index"])] = entry
            except (ValueError, KeyError, TypeError):
                bad += 1
    return entries, bad


class Journal:
    """Appends entries durably; each `record` is on disk when it returns."""

    def __init__(self, path: Path, *, fresh: bool) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle: TextIO = path.open("w" if fresh else "a", encoding="utf-8")
        if not fresh and self._ends_mid_line():
            self._handle.write("\n")  # a crash cut the last line short: start clean

    def _ends_mid_line(self) -> bool:
        size = self.path.stat().st_size
        if size == 0:
            return False
        with self.path.open("rb") as raw:
            raw.seek(size - 1)
            return raw.read(1) != b"\n"

    def record(self, entry: Mapping[str, Any]) -> None:
        self._handle.write(json_text(json.dumps(entry, ensure_ascii=False, default=str)) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def record_many(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Several entries, on disk together when it returns (one fsync)."""
        for entry in entries:
            self._handle.write(json_text(json.dumps(entry, ensure_ascii=False, default=str)) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


def lock_path(journal: Path) -> Path:
    """`out.journal.jsonl` → `out.journal.lock`."""
    return journal.with_name(journal.name.removesuffix(".jsonl") + ".lock")


class JournalLock:
    """One `sd batch` at a time per journal: an exclusive `flock` on `out.journal.lock`.

    The lock file holds who took it (pid, host, start time) so a second batch can say
    who is writing. It is removed on release; a taker checks, after locking, that the
    file it locked is still the one at the path (a releaser may have just removed it)
    and tries again otherwise. The kernel drops the lock when its holder dies, so a
    crashed batch never leaves a stale lock, only a file the next taker reuses.
    """

    def __init__(self, journal: Path) -> None:
        self.journal = journal
        self.path = lock_path(journal)
        self._fd: int | None = None
        self._acquire()

    def _acquire(self) -> None:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as exc:
                raise CliError(f"cannot lock {self.path}: {exc.strerror or exc}", code=1) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise CliError(
                    f"{self.journal} is being written by another sd batch ({holder}): wait for it to "
                    "finish or stop it (two batches on one output would run every row twice)"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise CliError(f"cannot lock {self.path}: {exc.strerror or exc}", code=1) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # we locked a file its releaser had just removed: take the new one
        os.ftruncate(fd, 0)
        note = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.write(fd, (json.dumps(note) + "\n").encode("utf-8"))
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # still ours: we hold the lock on it
        finally:
            os.close(fd)


def _holder(fd: int) -> str:
    """`pid 123 on host, since 10:22:49 UTC` from the lock file, as far as it says."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        note = json.loads(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(note["started"])))
        return f"pid {int(note['pid'])} on {note.get('host', '?')}, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid is not recorded yet"
