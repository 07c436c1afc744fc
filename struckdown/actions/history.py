"""`[[@history]]`: earlier conversation turns, from the caller or a file, as turns of this one.

The turns come from `context["_history_messages"]` (a list of `{"role", "content"}`
mappings, or `(role, text)` pairs) or, with `filename=` (or `context["_history_file"]`,
what `sd chat --history FILE` sets), from a file: a JSON list of such mappings, or
text with one turn per line — either every line starting `user:` / `assistant:`, or
plain lines whose roles alternate, the assistant's first (`first="user_first"` starts
with the user's). `n=` keeps the last n turns, `role=` only that role's. The value
stored is the list of turns, and each joins the conversation in order (SPEC §11).

A file is read only inside the working directory, and at most `MAX_BYTES` of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..syntax.nodes import Action

MAX_BYTES = 2_000_000
ROLES = ("user", "assistant")
_PREFIX = re.compile(r"^\s*(user|assistant)\s*:\s?", re.IGNORECASE)
_KEYS = ("filename", "first", "n", "role", "step")
USAGE = '[[@history]] or [[@history|filename="chat.txt", n=20]]'


def check(node: Action) -> None:
    for option in node.options:
        if option.key is None or option.key not in _KEYS:
            raise ValueError(f"takes {', '.join(k + '=' for k in _KEYS)} only: {USAGE}")


def history(
    filename: str | None = None,
    first: str = "assistant_first",
    n: int | None = None,
    role: str | None = None,
    step: Any = None,  # 0.x templates pass it; it never changed what was read
    context: Mapping[str, Any] | None = None,
) -> list[dict[str, str]]:
    context = context or {}
    if first not in ("assistant_first", "user_first"):
        raise ValueError(f"first= must be assistant_first or user_first, not {first!r}")
    if role is not None and role not in ROLES:
        raise ValueError(f"role= must be user or assistant, not {role!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise ValueError(f"n= must be a whole number of turns, not {n!r}")
    source = filename if filename is not None else context.get("_history_file")
    if source is not None:
        turns = read_turns(str(source), first)
    else:
        turns = [_turn(item) for item in context.get("_history_messages") or ()]
    if role is not None:
        turns = [t for t in turns if t["role"] == role]
    if n is not None:
        turns = turns[-n:] if n else []
    return turns


def _turn(item: Any) -> dict[str, str]:
    if isinstance(item, Mapping):
        who, text = item.get("role"), item.get("content")
    elif isinstance(item, (list, tuple)) and len(item) == 2:
        who, text = item
    else:
        raise ValueError(f"a history turn is a {{'role', 'content'}} mapping or a (role, text) pair, not {item!r}")
    if who not in ROLES:
        raise ValueError(f"a history turn's role is user or assistant, not {who!r}")
    return {"role": str(who), "content": "" if text is None else str(text)}


def read_turns(filename: str, first: str = "assistant_first") -> list[dict[str, str]]:
    """The turns of a history file (JSON list, `role:` lines, or alternating lines)."""
    path = _inside_working_directory(filename)
    with open(path, "rb") as handle:
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"history file {filename!r} is larger than {MAX_BYTES // 1_000_000} MB")
    text = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    if path.suffix.lower() == ".json":
        data = json.loads(text)
        if not isinstance(data, list):
            raise ValueError(f"history file {filename!r} must hold a JSON list of turns")
        return [_turn(item) for item in data]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and all(_PREFIX.match(line) for line in lines):
        return [
            {"role": m.group(1).lower(), "content": line[m.end() :].strip()}
            for line in lines
            if (m := _PREFIX.match(line)) is not None
        ]
    order = ("assistant", "user") if first == "assistant_first" else ("user", "assistant")
    return [{"role": order[i % 2], "content": line} for i, line in enumerate(lines)]


def _inside_working_directory(filename: str) -> Path:
    root = Path.cwd().resolve()
    path = (root / filename).resolve()
    if not path.is_relative_to(root):
        raise PermissionError(f"history file {filename!r} is outside the working directory")
    if not path.is_file():
        raise FileNotFoundError(f"history file {filename!r} not found in {root}")
    return path
