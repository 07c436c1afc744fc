"""`[[@evidence|query]]`: the passages of local text files that best match a query (BM25).

The files are the `.txt`, `.md`, `.markdown` and `.rst` files under a folder
(`folder=`, else `context["evidence_folder"]` as in 0.x, else `./evidence`), which must lie
inside the working directory. With no folder named and no `./evidence`, the value
is empty text and a warning says so (as in 0.18); a named folder that is missing, or
a folder with no text files in it, is an error naming it. Each paragraph (text between blank lines) is a
passage; the top `n` (default 3) by BM25 score, best first, are the value, each
headed by the file it came from. Passages that share no word with the query are
never returned. The ranking is the `bm25s` library's (the `search` extra:
`pip install 'struckdown[search]'`); an index is built once per folder and reused
until one of its files changes.

The value joins the conversation as a user turn, as in 0.x, so the next slot sees it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..notices import warn
from ..syntax.nodes import Action

SUFFIXES = frozenset({".txt", ".md", ".markdown", ".rst"})
DEFAULT_FOLDER = "evidence"
MAX_FILES = 5_000
MAX_BYTES = 50_000_000
MAX_N = 50
USAGE = "[[@evidence:found|query, n=3]] or [[@evidence:found|query=topic, folder=\"notes\"]]"
_KEYS = ("query", "n", "folder")


def check(node: Action) -> None:
    if not node.options:
        raise ValueError(f"needs a query: {USAGE}")
    unknown = [o.key for o in node.options if o.key is not None and o.key not in _KEYS]
    if unknown:
        raise ValueError(f"unknown option {unknown[0]!r} (it takes query=, n=, folder=): {USAGE}")


def evidence(
    query: Any = None,
    n: int = 3,
    folder: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> str:
    words = " ".join(str(q) for q in query) if isinstance(query, (list, tuple)) else str(query or "")
    if not words.strip():
        raise ValueError("@evidence needs a query")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise ValueError(f"n= must be a whole number from 1 to {MAX_N}, not {n!r}")
    named = context or {}
    chosen = folder if folder is not None else (named.get("evidence_folder") or named.get("_evidence_folder"))
    try:
        where = _folder(str(chosen or DEFAULT_FOLDER))
    except FileNotFoundError as exc:
        if chosen is not None:  # a folder the template or context named: a typo is an error
            raise
        # as 0.18: no ./evidence folder is no evidence, with a warning
        warn(f"@evidence: {exc}; it returns no passages")
        return ""
    index = _index_of(where)
    if not index.passages:  # a folder with nothing to search is a mistake, not "no evidence"
        raise FileNotFoundError(f"evidence folder {str(chosen or DEFAULT_FOLDER)!r} holds no text files "
                                f"({', '.join(sorted(SUFFIXES))})")  # fmt: skip
    return "\n\n".join(f"[{source}] {text}" for source, text in index.top(words, n))


@dataclass(frozen=True)
class Passage:
    source: str  # the file, relative to the working directory
    text: str


class _Index:
    """BM25 over one folder's passages."""

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        self._retriever: Any = None
        if passages:
            bm25s = _bm25s()
            self._retriever = bm25s.BM25()
            tokens = bm25s.tokenize([p.text for p in passages], stopwords="en", show_progress=False)
            self._retriever.index(tokens, show_progress=False)

    def top(self, query: str, n: int) -> list[tuple[str, str]]:
        if self._retriever is None:
            return []
        bm25s = _bm25s()
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not any(tokens):
            return []
        found, scores = self._retriever.retrieve(tokens, k=min(n, len(self.passages)), show_progress=False)
        return [
            (self.passages[int(i)].source, self.passages[int(i)].text)
            for i, score in zip(found[0], scores[0])
            if float(score) > 0
        ]


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise ImportError("@evidence needs the bm25s library: pip install 'struckdown[search]'") from None
    return bm25s


def _folder(name: str) -> Path:
    root = Path.cwd().resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise PermissionError(f"evidence folder {name!r} is outside the working directory")
    if not path.is_dir():
        raise FileNotFoundError(f"no evidence folder {name!r} in {root}")
    return path


def _files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())
    if len(files) > MAX_FILES:
        raise ValueError(f"evidence folder {folder.name!r} holds more than {MAX_FILES:,} text files")
    return files


def passages_of(files: Sequence[Path]) -> list[Passage]:
    """Every paragraph of every file, in file order."""
    root = Path.cwd().resolve()
    passages: list[Passage] = []
    total = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        total += len(text)
        if total > MAX_BYTES:
            raise ValueError(f"evidence files hold more than {MAX_BYTES // 1_000_000} MB of text")
        source = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
        for paragraph in text.replace("\r\n", "\n").split("\n\n"):
            if paragraph.strip():
                passages.append(Passage(source, " ".join(paragraph.split())))
    return passages


_CACHE_SIZE = 8
_indexes: OrderedDict[Path, tuple[tuple[tuple[str, int, int], ...], _Index]] = OrderedDict()
_lock = threading.Lock()


def _index_of(folder: Path) -> _Index:
    """The folder's index, rebuilt when a file was added, removed or changed."""
    files = _files(folder)
    stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    with _lock:
        held = _indexes.get(folder)
        if held is not None and held[0] == stamp:
            _indexes.move_to_end(folder)
            return held[1]
    index = _Index(passages_of(files))
    with _lock:
        _indexes[folder] = (stamp, index)
        while len(_indexes) > _CACHE_SIZE:
            _indexes.popitem(last=False)
    return index
