"""The files of an effect journal (SPEC §25): its header's name, and reading a journal file
from where the last read stopped, which the journal and the shards its Dask workers write
beside it (run/durable/shards.py) are read with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...errors import InputError

HEADER = "struckdown effects"


def shard_paths(journal: Path) -> list[Path]:
    """The files the Dask workers of a batch write beside `journal` (`JOURNAL.worker1`, …),
    in order; their `.lock` files are not among them."""
    prefix = journal.name + ".worker"
    try:
        names = os.listdir(journal.parent)
    except OSError:
        return []
    numbered = [(int(n[len(prefix):]), n) for n in names if n.startswith(prefix) and n[len(prefix):].isdigit()]
    return [journal.with_name(name) for _, name in sorted(numbered)]


class Tail:
    """One journal file read from where the last `read` stopped, whole lines only (a line
    a writer has not finished is read next time); `job` is its header's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.job = ""

    def header_job(self) -> str:
        """The job its header names now ("" when the file is gone or has no header)."""
        try:
            with self.path.open("rb") as handle:
                first = handle.readline()
            entry = json.loads(first)
        except (OSError, ValueError):
            return ""
        return str(entry.get("job") or "") if isinstance(entry, dict) and entry.get("journal") == HEADER else ""

    def read(self) -> list[dict[str, Any]]:
        """The effect records written since the last read."""
        try:
            if os.stat(self.path).st_size <= self.offset:
                return []
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise InputError(f"cannot read journal {self.path}: {exc}") from None
        end = data.rfind(b"\n") + 1
        self.offset += end
        entries: list[dict[str, Any]] = []
        for line in data[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line a kill cut short
            if not isinstance(entry, dict):
                continue
            if entry.get("journal") == HEADER:
                self.job = self.job or str(entry.get("job") or "")
            elif isinstance(entry.get("effect"), str):
                entries.append(entry)
        return entries
