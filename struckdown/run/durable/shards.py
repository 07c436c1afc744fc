"""The effect journal of a batch whose rows run in several processes (SPEC §25, §20).

`sd batch --workers N`, `--engine dask` and `complete_batch(..., executor=DaskExecutor(),
journal=...)` run rows in Dask worker processes, possibly on several machines that share
the journal's folder. One file cannot take their writes without a lock per line, so each
worker process appends to a file of its own beside the journal, a **shard**:
`JOURNAL.worker1`, `JOURNAL.worker2`, … The caller's process opens the journal itself
(`acquire`: its lock keeps every other process out, as for one process, and its header
names the job), and each worker process takes the first shard whose `.lock` no living
process holds. A shard starts with the journal's header (the same job), so an effect id,
a hash of the job, row, slot, name and arguments, is the same whichever process runs the
call; a shard whose header names another job (a journal deleted without its shards) is
emptied before it is used.

Every reader merges the journal and its shards: the caller's process and a later
`--resume` (`EffectJournal` reads them on opening), and each worker. A worker also
reads what the others wrote since it last looked whenever it meets an effect id it does
not hold as finished (`ShardJournal.state`): when Dask runs a row again after its worker
died, the new worker sees the dead one's `started` record and settles the call as a
resume would (the reconcile hook, else "outcome unknown"), and sees its `done` record and
answers the call from it. A worker holds its shard for the batch (`join`, once per batch
and process; `leave` when the batch ends); a killed worker's lock goes with its process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...errors import InputError
from .effects import _OPEN, EffectJournal, _locked
from .files import HEADER, Tail, journal_key, shard_paths


class ShardJournal(EffectJournal):
    """A worker process's writer of a batch's effect journal: reads the journal and every
    shard, appends to a shard of its own (see the module's text)."""

    def __init__(self, path: Path) -> None:  # the journal is the caller's: not locked here
        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self.open: set[str] = set()
        self.starts: dict[str, int] = {}
        self.settled: dict[str, dict[str, Any]] = {}
        # a worker writes its slots' answer lines to its shard but reuses none (docs/durable.md)
        self.answers: dict[tuple[int | None, str, str], int] = {}
        self.latest: dict[tuple[int | None, str], int] = {}
        self.answered_rows: set[int | None] = set()
        self._reader: Any = None
        self._key = journal_key()
        main = Tail(path)
        first = main.read()
        if not main.job:
            raise InputError(
                f"effect journal {path} is not there on this Dask worker (or has no header): the workers must "
                "see the journal's folder at the same path as the process that runs the batch"
            )
        self.job = main.job
        self._tails: dict[Path, Tail] = {path: main}
        for entry in first:
            self._note(entry)
        self.follow()
        self.shard, self._lock_path, self._lock = self._take_shard()
        self._tails.pop(self.shard, None)  # read up to now; from here on, only this process writes it
        self._fd = os.open(self.shard, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        size = os.fstat(self._fd).st_size
        if size and _last_byte(self.shard, size) != b"\n":
            os.write(self._fd, b"\n")  # a kill cut the last line short: start clean
        if size == 0:
            self._append({"journal": HEADER, "version": 1, "job": self.job})

    def _take_shard(self) -> tuple[Path, Path, int]:
        number = 1
        while True:
            shard = self.path.with_name(f"{self.path.name}.worker{number}")
            lock = Path(f"{shard}.lock")
            try:
                fd = _locked(lock, shard)
            except InputError:  # a living worker writes it
                number += 1
                continue
            tail = self._tails.get(shard) or Tail(shard)
            for entry in tail.read():  # what its last writer wrote after we looked
                if tail.job == self.job:
                    self._note(entry)
            if tail.job and tail.job != self.job:  # left by a job whose journal is gone: nobody reads it
                os.truncate(shard, 0)
            return shard, lock, fd

    def follow(self) -> None:
        """Read what the other writers (the journal, the other workers' shards) wrote since."""
        for shard in shard_paths(self.path):
            if shard not in self._tails and shard != getattr(self, "shard", None):
                self._tails[shard] = Tail(shard)
        for tail in self._tails.values():
            for entry in tail.read():
                if tail.job == self.job:
                    self._note(entry)

    def state(self, effect: str) -> dict[str, Any] | None:
        record = self.records.get(effect)
        if record is None or record.get("state") != "done":
            self.follow()  # another worker may have run this row before (and died)
            record = self.records.get(effect)
        return record


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as raw:
        raw.seek(size - 1)
        return raw.read(1)


def join(path: Any) -> EffectJournal:
    """In a worker process: the journal at `path` for the rows of one batch, held until
    `leave`. A process that has the journal open already (the caller's own, when the
    workers are threads of it) uses that; any other writes a shard."""
    key = os.path.abspath(os.fspath(path))
    held = _OPEN.get(key)
    if held is not None and isinstance(held[0], ShardJournal) and held[0].job != Tail(Path(key)).header_job():
        held = None  # the journal was deleted and begun again since: a new job (the old object is left alone)
    journal = held[0] if held is not None else ShardJournal(Path(key))
    _OPEN[key] = (journal, (held[1] if held is not None else 0) + 1)
    return journal


def discard(path: Path) -> None:
    """Delete a journal and its shards (`sd batch` once every row is done); the lock files
    of shards no living process holds go too."""
    path.unlink(missing_ok=True)
    for shard in shard_paths(path):
        shard.unlink(missing_ok=True)
        lock = Path(f"{shard}.lock")
        try:
            os.close(_locked(lock, shard))
        except (InputError, OSError):
            continue
        lock.unlink(missing_ok=True)
