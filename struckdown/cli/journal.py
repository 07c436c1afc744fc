"""The batch journal: one JSON line per finished row, flushed and fsynced at once.

A line is `{"index", "ok", "answers", "error", "usage", "halted", "input_hash",
"template_hash"}`; the last line for an index wins. The hashes let `--resume`
skip only rows whose input and template are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
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

    def close(self) -> None:
        self._handle.close()
