"""SPEC §29: a batch that finished leaves its journal as one `finished` record."""

from __future__ import annotations

import json
from pathlib import Path


def finished(journal: Path) -> bool:
    """Whether `journal` is a finished batch's: one line, `{"finished": true, …}`."""
    if not journal.exists():
        return False
    lines = journal.read_text(encoding="utf-8").splitlines()
    return len(lines) == 1 and json.loads(lines[0]).get("finished") is True


def only_finished_journal(folder: Path, name: str = "out.journal") -> bool:
    """The journal is its `finished` record, and its effect journal and shards are gone."""
    left = sorted(p.name for p in folder.glob(name + "*"))
    return left == [name + ".jsonl"] and finished(folder / (name + ".jsonl"))
