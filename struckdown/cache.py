"""Response cache: a slot's answer keyed on everything that decides it (SPEC §7).

The key covers the endpoint, the model, the full conversation, the
instructions, the output schema, the settings and the struckdown version, so
a cached answer is only reused for a byte-identical request to the same server.
Volatile message fields (timestamps, run/conversation/tool-call ids, provider
response ids, usage) are dropped first: they differ on every run and would make
every lookup a miss.

The store is one SQLite file in WAL mode, shared by every thread and process
that uses the same directory (batch workers, parallel `sd run`s). Each thread
gets its own connection; writers wait on `busy_timeout` instead of failing.
Nothing is opened until the first lookup. A failing cache never fails a run:
errors are logged, counted in `stats()["errors"]`, and treated as misses; a
stored value that does not decode to a JSON object (or is nested too deeply to
decode) is a miss too.

The answer path never waits on a lock: WAL readers do not block on writers, and
`aput` (what a run calls) and the access-time refresh of a hit go to one
background writer thread per cache, which may wait on another process's write
lock as long as it likes. Until a queued write lands, `get` serves it from
memory, so a process reads its own writes at once. Queued writes are flushed at
interpreter exit (for at most `EXIT_FLUSH_S` seconds) and by `flush()`.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import functools
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import log as _log  # noqa: F401 - the library's NullHandler

log = logging.getLogger(__name__)

DEFAULT_MAX_MB = 500
DB_NAME = "responses.sqlite3"
EXIT_FLUSH_S = 5.0  # at interpreter exit, wait at most this long for queued writes

#: Message fields that identify one run, response or call rather than what was said.
RUN_IDENTITIES = frozenset({
    "run_id", "conversation_id", "tool_call_id", "provider_response_id", "id",
    "provider_details", "metadata", "failed_attempts", "history_digest", "workspace_ref",
})  # fmt: skip
#: A message field whose declared type names one of these records when or how much, never
#: what: timestamps, durations, token usage. New ones are found by `volatile_fields`.
_VOLATILE_TYPE_WORDS = ("datetime", "timedelta", "RequestUsage")
#: Settings that change how a request travels, not what it answers.
TRANSPORT_SETTINGS = frozenset({"timeout", "request_timeout", "first_event_timeout", "max_retries"})

_TOUCH_AFTER_S = 60.0  # refresh an entry's access time at most this often (reads stay read-only)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    size INTEGER NOT NULL,
    created REAL NOT NULL,
    accessed REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_accessed ON responses (accessed);
"""


#: `STRUCKDOWN_CACHE` values that turn the response cache off (0.x's spelling; any case).
CACHE_OFF = frozenset({"", "0", "false", "no", "off"})


def cache_disabled() -> bool:
    """`STRUCKDOWN_CACHE=0` (or false, no, off, empty): no response cache, in the library and the CLI."""
    raw = os.environ.get("STRUCKDOWN_CACHE")
    return raw is not None and raw.strip().lower() in CACHE_OFF


def default_cache_dir() -> Path:
    """`STRUCKDOWN_CACHE=<dir>` (0.x's name), else `STRUCKDOWN_CACHE_DIR`, else `~/.cache/struckdown`."""
    raw = os.environ.get("STRUCKDOWN_CACHE")
    if raw is None or raw.strip().lower() in CACHE_OFF or raw.strip().lower() in ("1", "true", "yes", "on"):
        raw = os.environ.get("STRUCKDOWN_CACHE_DIR")
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "struckdown"


def default_max_bytes() -> int:
    """`STRUCKDOWN_CACHE_MAX_MB` (default 500) in bytes."""
    raw = os.environ.get("STRUCKDOWN_CACHE_MAX_MB")
    try:
        mb = float(raw) if raw else DEFAULT_MAX_MB
    except ValueError:
        log.warning("ignoring STRUCKDOWN_CACHE_MAX_MB=%r (not a number)", raw)
        mb = DEFAULT_MAX_MB
    return max(1, int(mb * 1024 * 1024))


@functools.cache
def volatile_fields() -> frozenset[str]:
    """Every message field that changes between identical conversations.

    The run identities above, and each field of pydantic-ai's message and part dataclasses
    whose type is a time, a duration or a usage record, read off the classes themselves:
    a field pydantic-ai adds later (2.78 added `request_timestamp` and `duration`) is
    dropped without being named here.
    """
    from pydantic_ai import messages as pm

    found = set(RUN_IDENTITIES)
    for value in vars(pm).values():
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            for field in dataclasses.fields(value):
                if any(word in str(field.type) for word in _VOLATILE_TYPE_WORDS):
                    found.add(field.name)
    return frozenset(found)


def _is_message(value: dict[str, Any]) -> bool:
    """A dumped message or part (their `kind` / `part_kind`), not a tool's arguments or a
    structured answer, whose keys (`id`, `timestamp`) are what was said."""
    return "part_kind" in value or value.get("kind") in ("request", "response")


def normalise_messages(messages: list[Any]) -> list[Any]:
    """JSON form of a pydantic-ai message list without its volatile fields.

    Accepts `ModelMessage` objects or their already-dumped JSON dicts.
    """
    if messages and not all(isinstance(m, dict) for m in messages):
        try:  # most conversations: no schema to build (pydantic-ai's adapter builds its own on first use)
            return [_fieldwise(m) for m in messages]
        except _NotFieldwise:
            pass
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        dumped: Any = ModelMessagesTypeAdapter.dump_python(messages, mode="json")
    else:
        dumped = messages
    return [_strip(m) for m in dumped]


#: Message and part classes whose JSON form (pydantic's) is their fields, one by one: no
#: field serializer, exclusion, alias or computed field. tests/run/test_cache.py compares
#: `_fieldwise` with `ModelMessagesTypeAdapter` over each of them.
_FIELDWISE = frozenset({
    "ModelRequest", "ModelResponse", "SystemPromptPart", "UserPromptPart", "TextPart", "ThinkingPart", "ToolCallPart",
})  # fmt: skip


class _NotFieldwise(Exception):
    """A value whose JSON form pydantic decides (a date, bytes, an enum, a file part, …)."""


def _fieldwise(value: Any) -> Any:
    """`_strip(ModelMessagesTypeAdapter.dump_python([…], mode="json"))` of one message made
    of plain values, without pydantic; raises _NotFieldwise for anything else."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float and math.isfinite(value):
        return value
    if kind is list or kind is tuple:
        return [_fieldwise(v) for v in value]
    if kind is dict and all(type(k) is str for k in value):
        return {k: _fieldwise(v) for k, v in value.items()}
    if kind.__module__ == "pydantic_ai.messages" and kind.__name__ in _FIELDWISE and dataclasses.is_dataclass(value):
        volatile = volatile_fields()
        return {f.name: _fieldwise(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in volatile}
    raise _NotFieldwise


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        if not _is_message(value):
            return {k: _strip(v) for k, v in value.items()}
        volatile = volatile_fields()
        return {k: _strip(v) for k, v in value.items() if k not in volatile}
    if isinstance(value, list | tuple):
        return [_strip(v) for v in value]
    return value


def cache_key(
    *,
    endpoint: str,
    model: str,
    messages: list[Any],
    instructions: str | None,
    output_schema: dict[str, Any] | str,
    settings: dict[str, Any],
    version: str,
) -> str:
    """sha256 (hex) of a canonical JSON of everything that decides the answer."""
    payload = {
        "endpoint": endpoint,
        "model": model,
        "messages": normalise_messages(list(messages)),
        "instructions": instructions,
        "output_schema": output_schema,
        "settings": {k: v for k, v in (settings or {}).items() if k not in TRANSPORT_SETTINGS},
        "version": version,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # lone surrogates hash too


_SURROGATES = {code: f"\\u{code:04x}" for code in range(0xD800, 0xE000)}


def _encode(value: dict[str, Any]) -> str:
    """Compact JSON that is always valid UTF-8: lone surrogates become `\\udXXX` escapes
    (which `json.loads` turns back into the same string)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_SURROGATES)


class ResponseCache:
    """SQLite-backed answer store with a size cap and least-recently-used eviction."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, *, max_bytes: int | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_cache_dir()
        self.path = self.directory / DB_NAME
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._hits = 0
        self._misses = 0
        self._errors = 0
        self._written_since_check = 0
        self._pid = os.getpid()
        self._pending: dict[str, str] = {}  # key → JSON text queued for the writer, served by `get`
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._writer: threading.Thread | None = None
        self._writer_conn: sqlite3.Connection | None = None
        self._idle = threading.Condition(self._lock)  # notified whenever the writer finishes a job
        _live_caches.add(self)

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.directory)!r}, max_bytes={self.max_bytes})"

    # -- connections ---------------------------------------------------------

    def _after_fork(self) -> None:
        if self._pid != os.getpid():
            # A forked child must not touch its parent's SQLite handles or writer: start afresh.
            self._pid = os.getpid()
            self._local = threading.local()
            self._connections = []
            self._lock = threading.Lock()
            self._idle = threading.Condition(self._lock)
            self._pending = {}
            self._jobs = collections.deque()
            self._writer = None
            self._writer_conn = None

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; the background writer (whichever thread runs it now)
        reuses one of its own, so a writer that comes and goes opens no new ones."""
        self._after_fork()
        if self._writer is not None and threading.current_thread() is self._writer:
            if self._writer_conn is None:
                self._writer_conn = self._open()
            return self._writer_conn
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._open()
        return conn

    def _open(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_SCHEMA)
        with self._lock:
            self._connections.append(conn)
        return conn

    def close(self) -> None:
        """Write what is queued, then close every connection this object opened (each
        thread reopens on next use)."""
        self.flush(EXIT_FLUSH_S)
        with self._lock:
            connections, self._connections = self._connections, []
            self._writer_conn = None
        for conn in connections:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        self._local = threading.local()

    # -- lookups -------------------------------------------------------------

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value, or None on a miss (or a cache failure, or a stored value that
        is not a JSON object). Never waits on another writer's lock."""
        self._after_fork()
        value: Any = None
        found = False
        with self._lock:
            queued = self._pending.get(key)
        try:
            if queued is not None:
                found, value = True, json.loads(queued)
            else:
                conn = self._conn()
                row = conn.execute("SELECT value, accessed FROM responses WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    found, value = True, json.loads(row[0])
                    if time.time() - row[1] > _TOUCH_AFTER_S:
                        self._touch_without_waiting(conn, key)
        except (sqlite3.Error, OSError, ValueError, TypeError, RecursionError) as exc:
            self._failed("read", exc)  # a value nested past the parser's depth is a miss too
            value = None
        if found and not isinstance(value, dict):
            self._failed("read", ValueError(f"stored value is a {type(value).__name__}, not an object"))
            value = None
        with self._lock:
            if value is None:
                self._misses += 1
            else:
                self._hits += 1
        answer: dict[str, Any] | None = value
        return answer

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store `value` (a JSON-serialisable dict) under `key`, replacing any earlier one;
        on disk when this returns (it may wait for another process's write lock)."""
        self._after_fork()
        text = self._encoded(value)
        if text is not None:
            self._store(key, text)

    def _encoded(self, value: dict[str, Any]) -> str | None:
        try:
            return _encode(value)
        except (TypeError, ValueError, RecursionError) as exc:  # not JSON: not cacheable, never fatal
            self._failed("write", exc)
            return None

    def _store(self, key: str, text: str) -> None:
        size = len(text.encode("utf-8")) + len(key)
        if size > self.max_bytes:
            return
        now = time.time()
        try:
            conn = self._conn()
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, value, size, created, accessed) VALUES (?, ?, ?, ?, ?)",
                (key, text, size, now, now),
            )
            with self._lock:
                self._written_since_check += size
                check = self._written_since_check >= max(1, self.max_bytes // 64)
                if check:
                    self._written_since_check = 0
            if check:
                self._evict(conn)
        except (sqlite3.Error, OSError) as exc:
            self._failed("write", exc)

    def _touch_without_waiting(self, conn: sqlite3.Connection, key: str) -> None:
        """Refresh a hit's access time now if the write lock is free, else leave it to the writer."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("UPDATE responses SET accessed = ? WHERE key = ?", (time.time(), key))
        except sqlite3.OperationalError:  # locked by another writer: never wait on the answer path
            self._submit(lambda: self._touch(key))
        finally:
            conn.execute("PRAGMA busy_timeout = 30000")

    def _touch(self, key: str) -> None:
        try:
            self._conn().execute("UPDATE responses SET accessed = ? WHERE key = ?", (time.time(), key))
        except (sqlite3.Error, OSError) as exc:
            self._failed("write", exc)

    async def aget(self, key: str) -> dict[str, Any] | None:
        """`get` in a worker thread, so a slow disk does not stall the event loop."""
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.get, key)

    async def aput(self, key: str, value: dict[str, Any]) -> None:
        """Queue `value` for the background writer and return at once: a run never waits
        on the store. `get` (in this process) sees it right away."""
        self._after_fork()
        text = self._encoded(value)
        if text is None:
            return
        with self._lock:
            self._pending[key] = text

        def write() -> None:
            self._store(key, text)
            with self._lock:
                if self._pending.get(key) is text:
                    del self._pending[key]

        self._submit(write)

    # -- the background writer -------------------------------------------------

    def _submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._jobs.append(job)
            if self._writer is None:
                self._writer = threading.Thread(target=self._write_queued, name="struckdown-cache-writer", daemon=True)
                self._writer.start()

    def _write_queued(self) -> None:
        """Run queued jobs until none is left; a failing job is logged, never fatal."""
        while True:
            with self._lock:
                if not self._jobs:
                    self._writer = None
                    self._idle.notify_all()
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception as exc:  # noqa: BLE001 - the writer must outlive any one write
                self._failed("write", exc)
            with self._lock:
                self._idle.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write is on disk (or `timeout` seconds); True when done."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._jobs or self._writer is not None:
                if self._pid != os.getpid():
                    return True
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    # -- maintenance ---------------------------------------------------------

    def _evict(self, conn: sqlite3.Connection) -> None:
        """Drop least-recently-used entries until the store is under 90 % of the cap."""
        total = conn.execute("SELECT COALESCE(SUM(size), 0) FROM responses").fetchone()[0]
        if total <= self.max_bytes:
            return
        to_free = total - int(self.max_bytes * 0.9)
        conn.execute("BEGIN IMMEDIATE")
        try:
            freed = 0
            doomed: list[str] = []
            oldest_first = conn.execute("SELECT key, size FROM responses ORDER BY accessed ASC, created ASC")
            for key, size in oldest_first:
                if freed >= to_free:
                    break
                doomed.append(key)
                freed += size
            oldest_first.close()
            conn.executemany("DELETE FROM responses WHERE key = ?", [(k,) for k in doomed])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def stats(self) -> dict[str, Any]:
        """Entries and bytes on disk, plus this process's hits, misses and errors."""
        self.flush(EXIT_FLUSH_S)  # count what this process has queued, too
        entries, total = 0, 0
        if self.path.exists():
            entries, total = self._conn().execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM responses").fetchone()
        with self._lock:
            hits, misses, errors = self._hits, self._misses, self._errors
        return {
            "path": str(self.path),
            "entries": entries,
            "bytes": total,
            "max_bytes": self.max_bytes,
            "hits": hits,
            "misses": misses,
            "errors": errors,
        }

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        self.flush(EXIT_FLUSH_S)
        with self._lock:
            self._pending.clear()
        if not self.path.exists():
            return 0
        conn = self._conn()
        removed = conn.execute("DELETE FROM responses").rowcount
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(removed)

    def _failed(self, what: str, exc: BaseException) -> None:
        with self._lock:
            self._errors += 1
        log.warning("struckdown response cache %s failed (%s): %s", what, self.path, exc)


_live_caches: weakref.WeakSet[ResponseCache] = weakref.WeakSet()


def flush_all(timeout: float = EXIT_FLUSH_S) -> None:
    """Write every cache's queued writes, waiting `timeout` seconds in all at most."""
    deadline = time.monotonic() + timeout
    for cache in list(_live_caches):
        cache.flush(max(0.0, deadline - time.monotonic()))


atexit.register(flush_all)


def resolve_cache(cache: Any, stores: dict[Path, ResponseCache]) -> Any:
    """The cache a run should use.

    None/False → no cache; True → the default on-disk cache; a directory path →
    a cache there (one per directory in `stores`, an Environment's, so counters and
    connections are reused); any object with `aget`/`aput` → itself.
    `STRUCKDOWN_CACHE=0` turns the on-disk cache off (True and paths); an object the
    caller passes is theirs and is used.
    """
    if cache is None or cache is False:
        return None
    if (cache is True or isinstance(cache, str | os.PathLike)) and cache_disabled():
        return None
    if cache is True or isinstance(cache, str | os.PathLike):
        directory = default_cache_dir() if cache is True else Path(cache).expanduser()
        found = stores.get(directory)
        if found is None:  # a racing twin is dropped unopened: a ResponseCache opens on first use
            found = stores.setdefault(directory, ResponseCache(directory))
        return found
    if callable(getattr(cache, "aget", None)) and callable(getattr(cache, "aput", None)):
        return cache
    from .errors import ConfigurationError

    raise ConfigurationError(
        f"cache= must be True, False, None, a directory or an object with aget/aput, got {type(cache).__name__}"
    )
