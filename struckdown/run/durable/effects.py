"""Exactly-once tool effects (SPEC §25): effect ids and the effect journal.

Every call of a tool that is not `@readonly`, in a run with a journal (`journal=` a path,
`sd run --journal FILE`), gets an effect id: a hash of the journal's job, the batch row, the
slot, the tool's name and its canonical arguments. Single flight already runs a slot's
identical calls once, so the call's position among identical calls of its slot is always
the first and the id does not depend on the order a response lists its calls in: it is the
same on a retry, a fallback (the slot restarts on the next model), a re-run of the row and a
resume. Before the tool runs the journal records the id as `started`; after, as `done` with
the result. A done id is answered from the journal; a started one that never finished (the
process died in the call) is never run again silently: the tool's reconcile hook
(`@effect(reconcile=fn)`) is asked, else the call waits for a person's decision, marked
"outcome unknown" (SPEC §12: `approve=` decides it, or the run pauses).

The journal is JSON lines: a header `{"journal": "struckdown effects", "job": ...}`, then
`{"effect", "state": "started", "tool", "arguments", "slot", "row"}`,
`{"effect", "state": "done", "ok", "output", "error"}` and `{"effect", "state": "cleared"}`
(the tool asked for a retry or an approval by raising: it took no effect). Each line is one
`write` to a file opened for appending, with the operating system before the tool runs: a
SIGKILL at any point loses nothing written. One process writes a journal at a time (an
exclusive `flock` on `FILE.lock`); the runs of one process (a batch's rows) share it, and
the Dask worker processes of the batch that holds it write shards beside it, which every
reader merges (run/durable/shards.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...errors import InputError
from ...tools import Reconcile, reconcile_of
from ..slot_run import current
from .files import HEADER, Tail, journal_key, shard_paths, signed, verify_line

ANSWER_PREFIX = b'{"answer": '  # a slot answer line (incremental re-runs, run/durable/rerun.py)

T = TypeVar("T")

class RowContext(dict[str, Any]):
    """A batch row's context that names its row: `sd batch` runs only the rows a `--resume`
    has not done, so the position among the rows run is not the input row."""

    def __init__(self, values: dict[str, Any], *, row: int) -> None:
        super().__init__(values)
        self.row = row


def effects_path(journal: Path) -> Path:
    """`out.journal.jsonl` → `out.journal.effects.jsonl` (`sd batch`'s effect journal)."""
    return journal.with_name(journal.name.removesuffix(".jsonl") + ".effects.jsonl")


def canonical(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, default=str, separators=(",", ":"))


def effect_id(job: str, row: int | None, slot: str, name: str, arguments: dict[str, Any]) -> str:
    """`eff_` and 32 hex digits: the same call of the same job always has the same id."""
    key = json.dumps([job, row, slot, 0, name, canonical(arguments)], separators=(",", ":"))
    return "eff_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class EffectJournal:
    """The effect records of one journal file (in memory: id → last record) and its writer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_path = Path(f"{path}.lock")
        self._lock = _locked(self._lock_path, path)
        self.records: dict[str, dict[str, Any]] = {}
        self.open: set[str] = set()  # ids started and not settled
        self.starts: dict[str, int] = {}  # id → its `started` records read so far (all files)
        self.settled: dict[str, dict[str, Any]] = {}  # id → the settling record that covers the most starts
        self.job = ""
        # SPEC §25 incremental re-runs: the slot answers the file held when it was opened, by
        # (row, slot, request key) and (row, slot) → the offset of the line (read back on use)
        self.answers: dict[tuple[int | None, str, str], int] = {}
        self.latest: dict[tuple[int | None, str], int] = {}
        self.answered_rows: set[int | None] = set()
        self._reader: Any = None
        self._key = journal_key()
        try:
            self._read()
        except BaseException:
            self._lock_path.unlink(missing_ok=True)
            os.close(self._lock)
            raise
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        if self._ends_mid_line():
            os.write(self._fd, b"\n")  # a kill cut the last line short: start clean
        if not self.job:
            self.job = secrets.token_hex(8)
            self._append({"journal": HEADER, "version": 1, "job": self.job})

    def _read(self) -> None:
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise InputError(f"cannot read journal {self.path}: {exc}") from None
        offset = 0
        number = 0
        with handle:
            for line in handle:
                number += 1
                at, offset = offset, offset + len(line)
                if not self.job and line.strip():
                    self._check_header(line, number)
                if line.startswith(ANSWER_PREFIX):
                    if line.endswith(b"}\n") and self.job:  # whole (a kill cuts a line short, never edits one)
                        verify_line(self._key, self.job, line, self.path, number)
                    self._note_answer(line, at)
                    continue
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line a kill cut short: its effect stays as it was before
                except RecursionError:  # nested deeper than the parser goes: no journal line is
                    raise InputError(f"journal {self.path} line {number}: nested too deeply to be a journal line "
                                     "(it was edited): refusing to read it") from None
                if not isinstance(entry, dict):
                    continue
                if entry.get("journal") == HEADER:
                    self.job = self.job or str(entry.get("job") or "")
                elif isinstance(entry.get("effect"), str):
                    verify_line(self._key, self.job, line, self.path, number)
                    self._note(entry)
        if (self.records or self.answers) and not self.job:
            raise InputError(f"journal {self.path} has effect records but no header line: it is not a struckdown journal")
        if self.job:  # what the Dask workers of a batch wrote beside it (run/durable/shards.py)
            for shard in shard_paths(self.path):
                tail = Tail(shard)
                for entry in tail.read():
                    if tail.job == self.job:
                        self._note(entry)

    def _check_header(self, line: bytes, number: int) -> None:
        """SPEC §29: the first line of a file given as a journal is a journal's header, else
        the file is refused (`--journal w.csv` must not append into the input)."""
        header = f'{{"journal": "{HEADER}", "version": 1, "job": "'.encode()
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            entry = None
        if isinstance(entry, dict) and entry.get("journal") == HEADER:
            return
        text = line.strip()
        if entry is None and (header.startswith(text) or (text.startswith(header) and text[len(header):].isalnum())):
            return  # the header a kill cut short (a whole one follows it)
        raise InputError(
            f"journal {self.path} exists and is not a struckdown journal (line {number} is not a journal's header); "
            "give a new file (or one struckdown wrote as a journal)"
        )

    def _note_answer(self, line: bytes, at: int) -> None:
        """An answer line's head (slot, row, request key) and where it starts; its result is
        read only when a run reuses it (a big journal costs no memory for its answers)."""
        if not line.endswith(b"}\n"):
            return  # cut short by a kill: the slot runs again
        try:
            head = json.loads(line[: line.index(b',"result":')] + b"}")
            key = (head["row"], str(head["answer"]), str(head["request"]))
        except (ValueError, KeyError, TypeError):
            return
        self.answers[key] = at
        self.latest[key[:2]] = at
        self.answered_rows.add(key[0])

    def answer(self, row: int | None, slot: str, request: str, result: str) -> None:
        """Record a slot's answer (`result`: its JSON) under the key of the request it sent."""
        head = json.dumps({"answer": slot, "row": row, "request": request}, ensure_ascii=False)
        body = f'{head[:-1]},"result":{result}}}'.encode("utf-8", "surrogatepass")
        os.write(self._fd, signed(self._key, self.job, body))

    def stored_answer(self, at: int) -> dict[str, Any] | None:
        """The result of the answer line at `at` (None: unreadable now)."""
        if self._reader is None:
            self._reader = self.path.open("rb")
        self._reader.seek(at)
        try:
            result: dict[str, Any] = json.loads(self._reader.readline())["result"]
        except (ValueError, KeyError, TypeError, RecursionError):
            return None  # unreadable (or nested deeper than a struckdown answer): the slot runs
        return result

    def _ends_mid_line(self) -> bool:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return False
        with self.path.open("rb") as raw:
            raw.seek(size - 1)
            return raw.read(1) != b"\n"

    def _append(self, entry: dict[str, Any]) -> None:
        if entry.get("state") in ("done", "cleared"):  # which starts it settles: files merge in any order
            entry = {**entry, "starts": self.starts.get(entry["effect"], 0)}
        body = json.dumps(entry, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")
        line = body + b"\n" if entry.get("journal") == HEADER else signed(self._key, self.job, body)
        os.write(self._fd, line)  # one write: whole, or cut short by a kill
        if "effect" in entry:
            self._note(entry)

    def _note(self, entry: dict[str, Any]) -> None:
        """One record, from any of the files (the journal, the workers' shards), read in any
        order: a `done`/`cleared` record says how many `started` records it settles
        (`starts`), so a decision written in the journal about a call a worker's shard holds
        as started settles it whichever is read first, and a later start is open again."""
        effect = entry["effect"]
        if entry.get("state") == "started":
            count = self.starts[effect] = self.starts.get(effect, 0) + 1
            settled = self.settled.get(effect)
            if settled is not None and settled["starts"] >= count:
                self.records[effect] = {**entry, **self.records.get(effect, {})}  # keeps the call's tool, arguments
                return  # settled already by a record read before it
            self.records[effect] = {**self.records.get(effect, {}), **entry}
            self.open.add(effect)
            return
        starts = entry.get("starts")
        if not isinstance(starts, int):  # written before records said so: settles what was read so far
            starts = self.starts.get(effect, 0)
        entry = {**entry, "starts": starts}
        best = self.settled.get(effect)
        if best is not None and best["starts"] > starts:
            return  # an older settlement than one read already
        self.settled[effect] = entry
        if starts >= self.starts.get(effect, 0):
            self.records[effect] = {**self.records.get(effect, {}), **entry}
            self.open.discard(effect)

    def unsettled(self) -> bool:
        """Whether some call started and never finished (a run may then pause on it)."""
        return bool(self.open)

    def state(self, effect: str) -> dict[str, Any] | None:
        return self.records.get(effect)

    def started(self, effect: str, name: str, arguments: dict[str, Any], slot: str, row: int | None) -> None:
        self._append({"effect": effect, "state": "started", "tool": name, "arguments": arguments, "slot": slot, "row": row})

    def done(
        self, effect: str, output: Any, ok: bool, error: str | None, *, decided: str | None = None, by: str | None = None
    ) -> None:
        """`decided`: how a call whose outcome was unknown was settled (`happened`, `deny`),
        `by` whom (`reconcile`: the tool's hook; else the user)."""
        from pydantic_core import to_jsonable_python

        entry = {"effect": effect, "state": "done", "ok": ok, "output": to_jsonable_python(output), "error": error}
        if decided is not None:
            entry.update(decided=decided, by=by or "user")
        self._append(entry)

    def cleared(self, effect: str) -> None:
        self._append({"effect": effect, "state": "cleared"})

    def decided(self, effect: str, how: str, *, by: str | None = None) -> None:
        """A call whose outcome was unknown was decided: `not-happened` clears it (it runs now)."""
        self._append({"effect": effect, "state": "cleared", "decided": how, "by": by or "user"})

    def undecided(self, row: int | None = None) -> list[dict[str, Any]]:
        """The `started` records of calls that never finished (of one batch row, or all)."""
        found = [self.records[e] for e in sorted(self.open)]
        return [r for r in found if row is None or r.get("row") == row]

    def close(self) -> None:
        try:
            if self._reader is not None:
                self._reader.close()
            os.close(self._fd)
            self._lock_path.unlink(missing_ok=True)  # still ours: we hold the lock on it
        finally:
            os.close(self._lock)


def _locked(lock: Path, journal: Path) -> int:
    """An exclusive `flock` on `lock` (removed by its holder on close: a taker checks that
    the file it locked is still the one at the path, and tries again otherwise)."""
    import fcntl

    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InputError(
                f"journal {journal} is being written by another process: wait for it to finish, or use another journal"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


_OPEN: dict[str, tuple[EffectJournal, int]] = {}


def acquire(path: Any) -> EffectJournal:
    """The journal at `path`, opened (and locked) once per process, shared by its runs."""
    key = os.path.abspath(os.fspath(path))
    held = _OPEN.get(key)
    if held is None:
        held = (EffectJournal(Path(key)), 0)
    _OPEN[key] = (held[0], held[1] + 1)
    return held[0]


def release(journal: EffectJournal) -> None:
    key = str(journal.path)
    held = _OPEN.get(key)
    if held is None or held[0] is not journal:  # a worker's journal of a batch gone by (run/effect_shards.join)
        return
    if held[1] <= 1:
        del _OPEN[key]
        journal.close()
    else:
        _OPEN[key] = (held[0], held[1] - 1)


@dataclass(frozen=True)
class EffectScope:
    """A run's journal and the batch row it runs (what an effect id needs besides the call)."""

    journal: EffectJournal
    row: int | None
    reconcilers: dict[str, Reconcile]

    def id_of(self, slot: str, name: str, arguments: dict[str, Any]) -> str:
        return effect_id(self.journal.job, self.row, slot, name, arguments)

    async def reconcile(self, name: str, effect: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        """(True, result) when the hook knows what the interrupted call did; (False, None)
        when it says the call did not happen. Raises LookupError when the tool has no hook."""
        import inspect

        hook = self.reconcilers.get(name)
        if hook is None:
            raise LookupError(name)
        if inspect.iscoroutinefunction(hook):
            found = await hook(effect, dict(arguments))
        else:
            import anyio

            found = await anyio.to_thread.run_sync(hook, effect, dict(arguments))
        return found is not None, found


_HOOKS: dict[int, tuple[tuple[Any, ...], dict[str, Reconcile]]] = {}


def scope_for(journal: EffectJournal | None, tools: tuple[Any, ...], names: tuple[str, ...]) -> EffectScope | None:
    if journal is None:
        return None
    held = _HOOKS.get(id(tools))  # once per tool set (a batch's rows share theirs)
    if held is None or held[0] is not tools:
        if len(_HOOKS) > 64:
            _HOOKS.clear()  # tool sets come and go (a server's requests): hold a few
        held = _HOOKS[id(tools)] = (tools, {n: h for n, t in zip(names, tools) if (h := reconcile_of(t)) is not None})
    return EffectScope(journal, current().effect_row, held[1])  # the batch row (slot_run.enter_row)


def with_effect_id(function: Any) -> Any:
    """A function tool with an `effect_id` parameter, as the tool pydantic-ai sees: the
    parameter left out of its schema (the model never fills it) and a `RunContext` first,
    from which the call's `ctx.effect_id` is passed in (an empty string without a journal)."""
    import functools
    import inspect
    import typing

    from pydantic_ai import RunContext

    signature = inspect.signature(function)
    if "effect_id" not in signature.parameters:
        return function
    hints = typing.get_type_hints(function)
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
    first = params[0] if params else None
    takes_ctx = first is not None and typing.get_origin(first.annotation) is RunContext or (
        first is not None and first.annotation is RunContext
    )
    rest = [p for p in (params[1:] if takes_ctx else params) if p.name != "effect_id"]
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=RunContext[Any])
    new_signature = signature.replace(parameters=[ctx_param, *rest])

    def arguments(ctx: Any, kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return ((ctx,) if takes_ctx else ()), {**kwargs, "effect_id": str(getattr(ctx, "effect_id", ""))}

    if inspect.iscoroutinefunction(function):

        async def call_async(ctx: Any, **kwargs: Any) -> Any:
            args, keywords = arguments(ctx, kwargs)
            return await function(*args, **keywords)

        wrapper: Any = call_async
    else:

        def call_sync(ctx: Any, **kwargs: Any) -> Any:
            args, keywords = arguments(ctx, kwargs)
            return function(*args, **keywords)

        wrapper = call_sync
    functools.update_wrapper(wrapper, function)
    del wrapper.__wrapped__  # pydantic-ai reads the signature below, not the function's
    wrapper.__signature__ = new_signature
    wrapper.__annotations__ = {p.name: p.annotation for p in new_signature.parameters.values()} | (
        {"return": hints["return"]} if "return" in hints else {}
    )
    return wrapper
