"""The batch journal: one JSON line per finished row, written at once.

A line is `{"index", "ok", "answers", "error", "usage", "halted", "input_hash",
"template_hash"}`, plus `"provider_batch"` (the row's requests waiting in provider
batches, written when a batch is created, see cli/provider_batch.py); the last line
for an index wins. The hashes let `--resume` skip only rows whose input and job are
unchanged. Each line reaches the
operating system before `record` returns (a killed or crashed `sd` loses no
finished row); a background thread `fsync`s what was written every
`SYNC_EVERY_S`, one `fsync` for every line since the last, so the disk's latency
never holds the rows back.

The journal is also where the output comes from: `JournalIndex` keeps, per row,
only where its last line starts (and whether it can be reused), in compact
arrays, and `JournalReader` reads a line back by that offset, so the output is
assembled in input order without holding the rows' answers. `JournalLock` keeps
a second batch off a journal that one is writing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..codec import json_text
from ..errors import InputError, OutputError


def journal_path(output: Path) -> Path:
    """`out.csv` → `out.journal.jsonl`, beside the output."""
    return output.with_name(f"{output.stem}.journal.jsonl")


def content_hash(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_journal(path: Path) -> tuple[dict[int, dict[str, Any]], int]:
    """Every entry in memory (for tools and tests; `sd batch` reads a `JournalIndex`)."""
    return _read_all(path)


def _read_all(path: Path) -> tuple[dict[int, dict[str, Any]], int]:
    """Entries by row index (last write wins) and the number of unreadable lines
    (a line cut short by a crash is one)."""
    entries: dict[int, dict[str, Any]] = {}
    bad = 0
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        return entries, 0
    except OSError as exc:
        raise InputError(f"cannot read journal {path}: {exc}") from None
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


#: Set (to K) by the kill-and-resume tests: the process SIGKILLs itself right after
#: journaling its K-th row, a crash at an exact point instead of a timed kill.
KILL_AFTER_ENV = "_STRUCKDOWN_BATCH_KILL_AFTER"

#: How often (seconds) the journal is fsynced while rows are being written.
SYNC_EVERY_S = 0.2

#: Rows a journal index can address (a larger index in a journal line is damage).
MAX_ROWS = 1 << 31


def journal_failure(path: Path, exc: OSError, saved: int, total: int) -> str:
    """The one line `sd batch` ends with when its journal cannot be written (a full disk,
    a quota, a disk error): which file, why, and what is saved."""
    import errno

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        name = "ENOSPC" if exc.errno == errno.ENOSPC else "EDQUOT"
        why, fix = f"the disk is full ({name}: {os.strerror(exc.errno)})", "free some space and "
    else:
        why, fix = exc.strerror or str(exc), ""
    return (
        f"cannot write the batch journal {path}: {why}; {saved}/{total} rows are saved in it; "
        f"{fix}run the same command with --resume"
    )


class Journal:
    """Appends entries; each `record` is with the operating system when it returns
    (a background thread fsyncs them soon after) and says where its line starts."""

    def __init__(self, path: Path, *, fresh: bool) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("wb" if fresh else "ab")
        self.offset = os.fstat(self._handle.fileno()).st_size
        if not fresh and self._ends_mid_line():
            self._write(b"\n")  # a crash cut the last line short: start clean
        self.recorded = 0
        kill_after = os.environ.get(KILL_AFTER_ENV, "")
        self._kill_after = int(kill_after) if kill_after.isdigit() else None
        self._syncer = _Syncer(self._handle.fileno())

    def _ends_mid_line(self) -> bool:
        if self.offset == 0:
            return False
        with self.path.open("rb") as raw:
            raw.seek(self.offset - 1)
            return raw.read(1) != b"\n"

    def _write(self, data: bytes) -> None:
        self._handle.write(data)
        self._handle.flush()
        self.offset += len(data)

    def record(self, entry: Mapping[str, Any]) -> int:
        """Append `entry` as one line; returns the offset where the line starts."""
        start = self.offset
        line = json_text(json.dumps(entry, ensure_ascii=False, default=str)) + "\n"
        self._write(line.encode("utf-8"))
        self._syncer.dirty()
        self.recorded += 1
        if self._kill_after is not None and self.recorded >= self._kill_after:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return start

    def record_many(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Several entries, on disk together when it returns (one fsync)."""
        lines = "".join(json_text(json.dumps(entry, ensure_ascii=False, default=str)) + "\n" for entry in entries)
        self._write(lines.encode("utf-8"))  # keeps `offset` right for the lines after these
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        """Everything written is on disk when this returns (else an OSError)."""
        self._syncer.stop()
        try:
            os.fsync(self._handle.fileno())
        finally:
            self._handle.close()


def finish_journal(path: Path, *, rows: int, output: Path, template_hash: str) -> None:
    """SPEC §29: a batch that finished leaves its journal as one `finished` record (written
    beside it and renamed over it: at every moment the file is the whole journal or the
    record, never gone), so a `--resume` after it runs nothing."""
    record = {"finished": True, "rows": rows, "output": str(output), "template_hash": template_hash,
              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    scratch = path.with_name(path.name + ".finishing")
    with scratch.open("wb") as handle:
        handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(scratch, path)
    try:
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)  # the rename itself on disk before the effect journal goes
    except OSError:
        pass
    finally:
        os.close(folder)


class _Syncer:
    """fsyncs a file from a thread, every `SYNC_EVERY_S` while something was written
    since the last fsync. Writers only bump a counter: waking a thread per line would
    cost each row a switch of the interpreter lock."""

    def __init__(self, fd: int) -> None:
        import threading

        self.fd = fd
        self.written = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="struckdown-journal-fsync", daemon=True)
        self.thread.start()

    def dirty(self) -> None:
        self.written += 1

    def _run(self) -> None:
        synced = 0
        while not self.stopping.wait(SYNC_EVERY_S):
            written = self.written
            if written == synced:
                continue
            try:
                os.fsync(self.fd)
            except OSError:
                return  # closed under us, or a disk error the final fsync reports
            synced = written

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


class JournalIndex:
    """Per row index, where its last journal line starts and whether that line can be
    reused by this job: compact arrays (17 bytes a row), never the entries.

    `reusable(index, input_hash)` is true for a row whose last line is `ok`, of this
    job (the same `template_hash`) and of the same input. `answer_keys` are the
    answer columns of this job's lines."""

    def __init__(self) -> None:
        self.offsets = array("q")  # -1: no line for this index
        # bit 0: ok, bit 1: this job, bit 2: waiting in provider batches, bit 3: not run,
        # bit 4: waits for a decision about a call whose outcome is unknown (SPEC §29)
        self.flags = bytearray()
        self.finished: dict[str, Any] | None = None  # the `finished` record of a batch that ended
        self.hashes = bytearray()  # 8 bytes of input_hash per index
        self.lines = 0  # distinct indexes with a line
        self.bad = 0  # unreadable lines
        self.answer_keys: dict[str, None] = {}

    @classmethod
    def read(cls, path: Path, template_hash: str) -> JournalIndex:
        index = cls()
        try:
            handle = path.open("rb")
        except FileNotFoundError:
            return index
        except OSError as exc:
            raise InputError(f"cannot read journal {path}: {exc}") from None
        offset = 0
        with handle:
            for line in handle:
                start, offset = offset, offset + len(line)
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    if isinstance(entry, dict) and entry.get("finished") is True:
                        index.finished = entry
                        continue
                    row = int(entry["index"])
                    if not 0 <= row < MAX_ROWS:
                        raise ValueError(row)
                    digest = bytes.fromhex(str(entry.get("input_hash") or "").ljust(16, "0")[:16])
                except (ValueError, KeyError, TypeError, AttributeError):
                    index.bad += 1
                    continue
                same_job = entry.get("template_hash") == template_hash
                waiting = not entry.get("ok") and not entry.get("error") and "provider_batch" in entry
                index._set(row, start, bool(entry.get("ok")), same_job, digest, waiting, bool(entry.get("not_run")),
                           bool(entry.get("unknown")))
                if same_job and isinstance(entry.get("answers"), dict):
                    index.answer_keys.update(dict.fromkeys(entry["answers"]))
        return index

    def reserve(self, rows: int) -> None:
        """Room for `rows` rows at once (before a run), not one row at a time as they finish."""
        self._grow(rows)

    def _grow(self, size: int) -> None:
        missing = size - len(self.offsets)
        if missing > 0:
            self.offsets.extend(array("q", [-1]) * missing)
            self.flags.extend(bytes(missing))
            self.hashes.extend(bytes(8 * missing))

    def _set(
        self, row: int, offset: int, ok: bool, same_job: bool, digest: bytes, waiting: bool = False,
        unrun: bool = False, unknown: bool = False,
    ) -> None:
        self._grow(row + 1)
        if self.offsets[row] < 0:
            self.lines += 1
        self.offsets[row] = offset
        self.flags[row] = int(ok) | (int(same_job) << 1) | (int(waiting) << 2) | (int(unrun) << 3) | (int(unknown) << 4)
        self.hashes[8 * row : 8 * row + 8] = digest

    def note(self, row: int, offset: int, ok: bool, unknown: bool = False) -> None:
        """A line this run wrote (always of this job)."""
        self._set(row, offset, ok, True, bytes(8), unknown=unknown)

    def has(self, row: int) -> bool:
        return row < len(self.offsets) and self.offsets[row] >= 0

    def ok(self, row: int) -> bool:
        return self.has(row) and bool(self.flags[row] & 1)

    def reusable(self, row: int, input_hash: str) -> bool:
        if not self.has(row) or self.flags[row] != 3:
            return False
        return self.hashes[8 * row : 8 * row + 8] == bytes.fromhex(input_hash[:16].ljust(16, "0"))

    def offset(self, row: int) -> int:
        return self.offsets[row] if row < len(self.offsets) else -1


class JournalReader:
    """Reads the entry whose line starts at an offset (`os.pread`: no buffer to refill,
    nothing mapped into memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)

    def entry(self, offset: int) -> dict[str, Any]:
        size = 4096
        while True:
            data = os.pread(self.fd, size, offset)
            end = data.find(b"\n")
            if end >= 0 or len(data) < size:
                line = data if end < 0 else data[:end]
                break
            size *= 4
        try:
            entry: dict[str, Any] = json.loads(line)
        except ValueError:
            raise OutputError(f"journal {self.path} changed while the batch ran (offset {offset})") from None
        return entry

    def close(self) -> None:
        os.close(self.fd)


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
                raise OutputError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise InputError(
                    f"{self.journal} is being written by another sd batch ({holder}): wait for it to "
                    "finish or stop it (two batches on one output would run every row twice)"
                ) from None
            except OSError as exc:
                os.close(fd)
                raise OutputError(f"cannot lock {self.path}: {exc.strerror or exc}") from None
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
