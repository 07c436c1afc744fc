"""`sd batch`: one template over many rows, journaled row by row, output in input order."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import loading
from .display import make_console
from .errors import EXIT_ERROR, EXIT_HALTED, EXIT_INTERRUPTED, EXIT_OK, CliError, describe
from .journal import Journal, JournalIndex, JournalLock, JournalReader, content_hash, journal_path
from .loading import load_program, load_tools
from .model_notes import show_config_models
from .progress import BatchProgress
from .tables import InputRows, columns_of, json_line, output_format, warn_lone_surrogates, write_table
from .text import visible

SHOWN_FAILURES = 5
#: A full garbage collection after every this many finished rows. After the start-up
#: heap is frozen it walks only the rows in flight and the garbage of finished ones
#: (a few milliseconds), and it keeps that garbage from growing with the batch.
GC_EVERY_ROWS = 500


@dataclass
class BatchRequest:
    template: Path
    inputs: Sequence[str]
    output: Path | None = None
    jobs: int = 8
    max_requests: int | None = None  # None: 2 x jobs
    resume: bool = False
    model: str | None = None
    tools_file: Path | None = None
    cache: bool = True
    keep_journal: bool = False
    include_paths: Sequence[Path] = field(default_factory=tuple)
    engine: str = "local"  # "local" (this process) or "dask" (struckdown.distributed)
    address: str | None = None  # the Dask scheduler; None: a private local cluster
    retries: int = 2  # Dask: runs of a row again after a transient provider error
    workers: int | None = None  # processes of a private local cluster (--workers); None: 1, or 2 with --engine dask
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments for every row's run


def batch_command(request: BatchRequest) -> int:
    program = load_program(request.template, request.include_paths)
    if request.output is not None:
        output_format(request.output)
    elif request.resume:
        raise CliError("--resume needs -o OUTPUT: the journal lives beside the output file")
    inputs = InputRows(request.inputs)
    lock = JournalLock(journal_path(request.output)) if request.output is not None else None
    try:
        return BatchJob(request, program, inputs).run()
    finally:
        inputs.close()
        if lock is not None:
            lock.release()


def job_fingerprint(request: BatchRequest, program: Any) -> str:
    """What decides a row's answer besides the row: the template and every file it
    includes, the model (the flag, else the environment that picks it), the tools file.
    `--resume` reuses a journaled row only when this is unchanged (issue 24 item 4)."""
    import os

    includes = []
    for name, _ in program.template.included_files:
        try:
            includes.append((name, content_hash(Path(name).read_text(encoding="utf-8", errors="replace"))))
        except OSError:
            includes.append((name, "unreadable"))
    tools = None
    if request.tools_file is not None:
        try:
            tools = content_hash(request.tools_file.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            tools = "unreadable"
    model_env = {k: os.environ.get(k) for k in ("STRUCKDOWN_MODEL", "DEFAULT_LLM", "LLM_API_BASE") if os.environ.get(k)}
    return content_hash(
        {"template": program.template.source, "includes": includes, "model": request.model or model_env, "tools": tools}
    )


class BatchJob:
    """One `sd batch`, in three passes over the inputs, none holding the rows:

    1. `scan`: read every row once before any model call (a broken input line is an
       error before anything is paid), count them, note the input columns, and
       decide from the journal which rows are done (`--resume`);
    2. `run`: read them again, lazily, as the batch takes them; each finished row
       goes to the journal (`finish`), the progress bar and the tallies at once;
    3. `assemble`: read them a third time and write the output in input order,
       each row with its journal line, read back by offset.

    Without `-o` there is no journal: rows go to stdout in input order as they
    finish (`_InOrder`). Per-row state is a few bytes (hashes, flags, offsets).

    To extend: an option that adds a keyword to every row's run goes into
    `BatchRequest.options` (see `run_options`); a change to a row before it runs
    into `prepare`; something done with each finished row into `finish`.
    """

    def __init__(self, request: BatchRequest, program: Any, inputs: InputRows) -> None:
        self.request = request
        self.program = program
        self.inputs = inputs
        self.fingerprint = job_fingerprint(request, program)
        self.console = make_console(sys.stderr)
        self.journal: Journal | None = None
        self.index = JournalIndex()
        self.total = 0
        self.columns: dict[str, None] = {}  # input columns, first seen first
        self.hashes = bytearray()  # each row's input hash (8 bytes)
        self.skip = bytearray()  # 1: done in the journal (--resume)
        self.done_before = 0
        self.inflight: dict[int, tuple[int, dict[str, Any]]] = {}  # batch position -> (row index, row)
        self.tally = _Tally()
        self.stdout = _InOrder() if request.output is None else None

    # -- the passes -------------------------------------------------------------------

    def run(self) -> int:
        request = self.request
        if request.output is not None:
            self.index = JournalIndex.read(journal_path(request.output), self.fingerprint)
            if self.index.lines and not request.resume:
                raise CliError(
                    f"{journal_path(request.output)} holds {self.index.lines} finished rows from an earlier run: "
                    "pass --resume to continue it, or delete it to start over"
                )
        self.scan()
        if request.output is not None:
            self._resume_note()
            self.journal = Journal(journal_path(request.output), fresh=not request.resume)
        runner = self._runner()
        started = time.perf_counter()
        progress = BatchProgress(self.console, self.total, self.done_before)
        self.progress = progress
        _freeze_start_up()
        try:
            with progress:
                if self.total > self.done_before:  # else nothing to run: no cluster to start
                    asyncio.run(runner(self.contexts()))
        except KeyboardInterrupt:
            done = self.done_before + self.tally.rows
            where = f"saved in {self.journal.path}; run the same command with --resume" if self.journal else "written above"
            raise CliError(f"interrupted: {done}/{self.total} rows are {where}", EXIT_INTERRUPTED) from None
        finally:
            gc.unfreeze()
            if self.journal is not None:
                self.journal.close()
        if request.output is not None and self.journal is not None:
            self.assemble(request.output, self.journal.path)
            if not self.tally.failures and not request.keep_journal:
                self.journal.path.unlink(missing_ok=True)
        self.tally.summary(self.console, request, self.total, self.done_before, time.perf_counter() - started)
        if self.tally.failed:
            return EXIT_ERROR
        return EXIT_HALTED if self.tally.halted else EXIT_OK

    def scan(self) -> None:
        """Pass 1: every row read and checked once; hashes, columns, rows done."""
        for spec, number, row in self.inputs.numbered():
            index = self.total
            self.total += 1
            warn_lone_surrogates(spec, number, row, _warn)
            self.columns.update(dict.fromkeys(row))
            digest = content_hash(row)
            self.hashes += bytes.fromhex(digest)
            reused = self.index.reusable(index, digest)
            self.skip.append(reused)
            self.done_before += reused

    def contexts(self) -> Iterator[dict[str, Any]]:
        """Pass 2: the rows still to run, read again as the batch takes them."""
        position = 0
        for index, row in enumerate(self.inputs):
            if index >= self.total or self.skip[index]:
                continue
            if content_hash(row) != self.input_hash(index):
                raise self._changed(index)
            self.inflight[position] = (index, row)
            position += 1
            yield self.prepare(row)

    def prepare(self, row: dict[str, Any]) -> dict[str, Any]:
        """The context a row runs with (the row itself)."""
        return row

    def finish(self, position: int, outcome: Any) -> None:
        """A row finished: journal it, count it, show it."""
        index, row = self.inflight.pop(position)
        entry = journal_entry(index, outcome, self.input_hash(index), self.fingerprint)
        if self.journal is not None:
            try:
                offset = self.journal.record(entry)
            except OSError as exc:
                raise CliError(f"cannot write journal {self.journal.path}: {exc}", code=EXIT_ERROR) from None
            self.index.note(index, offset, entry["ok"])
        self.tally.add(entry)
        if self.tally.rows % GC_EVERY_ROWS == 0:
            gc.collect()
        self.progress.advance(entry["ok"])
        if self.stdout is not None:
            self.stdout.offer(index, output_row(row, entry))

    def assemble(self, output: Path, journal: Path) -> None:
        """Pass 3: the output in input order, each row beside its journal line."""
        reader = JournalReader(journal)

        def rows() -> Iterator[dict[str, Any]]:
            for index, row in enumerate(self.inputs):
                offset = self.index.offset(index) if index < self.total else -1
                if offset < 0:
                    raise self._changed(index)
                entry = reader.entry(offset)
                if entry.get("input_hash") != content_hash(row):
                    raise self._changed(index)
                yield output_row(row, entry)

        try:
            write_table(output, rows(), self.output_columns())
        finally:
            reader.close()

    # -- pieces -----------------------------------------------------------------------

    def input_hash(self, index: int) -> str:
        return self.hashes[8 * index : 8 * index + 8].hex()

    def output_columns(self) -> list[str]:
        """Input columns, then answers in template order, then `_error` if a row failed."""
        keys = self.program.keys
        answered = {**self.index.answer_keys, **self.tally.answer_keys}
        ranked = sorted(answered, key=lambda k: keys.index(k) if k in keys else len(keys))
        columns = list(self.columns)
        columns += [k for k in ranked if k not in self.columns]
        if self.tally.failures:
            columns.append("_error")
        return columns

    def _changed(self, index: int) -> CliError:
        return CliError(
            f"the inputs changed while the batch ran (row {index} is not the row it was): "
            "run the same command again with --resume",
            code=EXIT_ERROR,
        )

    def _resume_note(self) -> None:
        request, index = self.request, self.index
        path = journal_path(request.output) if request.output is not None else None
        if not request.resume:
            return
        if not index.lines:
            self.console.file.write(f"nothing to resume in {path} (none yet, or every row succeeded): running every row\n")
            return
        ok_lines = sum(flag & 1 for flag in index.flags)
        stale = ok_lines - self.done_before
        failed = index.lines - ok_lines
        note = f"resuming {path}: {self.done_before} of {self.total} rows done"
        if failed:
            note += f", {failed} failed rows run again"
        if stale:
            note += f", {stale} rows whose input or job (template, includes, model, tools) changed run again"
        if index.bad:
            note += f" ({index.bad} unreadable journal lines ignored)"
        self.console.file.write(note + "\n")

    def run_options(self) -> dict[str, Any]:
        """Keyword arguments every row's run gets, on either engine."""
        request = self.request
        return {
            "cache": request.cache,
            "on_halt": "return",
            "max_requests": request.max_requests or 2 * request.jobs,
            **request.options,
        }

    def _runner(self) -> Any:
        workers = self.request.workers
        if self.request.engine != "local" or (workers is not None and workers > 1):
            return _dask_runner(self, self.request, self.program)
        return _local_runner(self, self.request, self.program)


def _freeze_start_up() -> None:
    """What start-up made (modules, schemas, agents: most of the heap) lives to the end:
    freeze it, so that collections never walk it again, and collect once after, so the
    collector measures "many objects survived" against the rows' objects alone. Cyclic
    garbage of finished rows is then collected as it goes (and every `GC_EVERY_ROWS`),
    not left to grow to a quarter of the start-up heap before a full collection."""
    gc.collect()
    gc.freeze()
    gc.collect()


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {visible(message)}\n")


def _model(name: str | None, program: Any) -> Any:
    """Resolve once, up front: a missing model is one error, not one per row."""
    model = loading.resolve_cli_model(name)  # via the module: tests patch it
    if not program.slots():
        return model
    show_config_models(program, model)
    from ..environment import default_environment

    return default_environment().resolve_model(model)


def _local_runner(job: BatchJob, request: BatchRequest, program: Any) -> Any:
    """The rows run on this process's event loop."""
    tools = load_tools(request.tools_file)
    model = _model(request.model, program)

    async def run(contexts: Iterator[dict[str, Any]]) -> None:
        from .. import api

        batch = api.complete_batch_iter_async(
            program, contexts, concurrency=request.jobs, model=model, tools=tools, **job.run_options()
        )
        async with aclosing(batch):
            async for position, outcome in batch:
                job.finish(position, outcome)

    return run


def _dask_runner(job: BatchJob, request: BatchRequest, program: Any) -> Any:
    """`--workers N` or `--engine dask`: the rows run on a Dask cluster (struckdown.distributed):
    N worker processes of a private cluster on 127.0.0.1, or the scheduler at --address.

    Only names travel: the model string (also a `package.module:factory` name) and
    the tools as a file shipped as text or a module name. The model, tools and deps
    are resolved once on a worker before any row runs.
    """
    if request.engine not in ("local", "dask"):
        raise CliError(f"unknown engine {request.engine!r}: use local or dask")
    try:
        from ..distributed import DaskExecutor
    except ImportError as exc:
        flag = "--workers" if request.engine == "local" else "--engine dask"
        raise CliError(f"{flag}: {exc}") from None
    kwargs: dict[str, Any] = {"model": request.model, "tools": _dask_tools(request.tools_file)}
    options = job.run_options()
    try:
        from ..distributed import ship_kwargs

        ship_kwargs({**kwargs, **options})
    except (ValueError, TypeError) as exc:
        raise CliError(str(exc)) from None
    workers = request.workers or 2
    if request.address is None:  # a worker with no share of the caps would idle
        workers = max(1, min(workers, request.jobs, options["max_requests"]))

    async def run(contexts: Iterator[dict[str, Any]]) -> None:
        from .. import api

        executor = DaskExecutor(
            request.address, max_in_flight=request.jobs, retries=request.retries, n_workers=workers,
            keep_messages=False,  # the journal keeps answers and usage, not conversations
        )  # fmt: skip
        async with executor:
            if program.slots():
                await executor.probe(**kwargs)  # a missing model or tool: one error, not one per row
            batch = api.complete_batch_iter_async(
                program,
                contexts,
                concurrency=2 * request.jobs,  # queued at the scheduler; -j caps how many run
                template_path=request.template,
                include_paths=request.include_paths,
                executor=executor,
                **kwargs,
                **options,
            )
            async with aclosing(batch):
                async for position, outcome in batch:
                    job.finish(position, outcome)

    return run


def _dask_tools(tools: Path | None) -> list[str]:
    """A tools FILE is read here and shipped to the workers as text; anything else
    must be a module (or module:function) importable on the workers."""
    if tools is None:
        return []
    if tools.is_file():
        return [str(tools.resolve())] if tools.suffix == ".py" else _not_tools(tools)
    name = str(tools)
    module = name.partition(":")[0]
    if module and all(part.isidentifier() for part in module.split(".")):
        return [name]
    return _not_tools(tools)


def _not_tools(tools: Path) -> list[str]:
    raise CliError(
        f"--tools {tools}: with --workers or --engine dask give a .py file (shipped to the workers) "
        "or a module importable on the workers (package.module or package.module:function)"
    )


def journal_entry(index: int, outcome: Any, input_hash: str, template_hash: str) -> dict[str, Any]:
    """One journal line for a finished row (a Result, or the exception it failed with)."""
    entry: dict[str, Any] = {"index": index, "ok": False, "answers": {}, "error": None, "usage": {}, "halted": None}
    if isinstance(outcome, BaseException):
        entry["error"] = describe(outcome)
    else:
        halted = outcome.halted
        entry.update(answers=outcome.to_dict(), usage=outcome.usage.to_dict(), ok=halted is None)
        if halted is not None:
            entry.update(error=describe(halted), halted={"slot": halted.slot, "reason": halted.reason})
    entry.update(input_hash=input_hash, template_hash=template_hash)
    return entry


def output_row(row: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    out = {**row, **entry["answers"]}
    if not entry["ok"]:
        out["_error"] = entry["error"]
    return out


def output_columns(rows: list[dict[str, Any]], entries: list[dict[str, Any]], keys: Sequence[str]) -> list[str]:
    """Input columns, then answers in template order, then `_error` if a row failed."""
    columns = columns_of(rows)
    answered = columns_of(e["answers"] for e in entries)
    ranked = sorted(answered, key=lambda k: keys.index(k) if k in keys else len(keys))
    columns += [k for k in ranked if k not in columns]
    if any(not e["ok"] for e in entries):
        columns.append("_error")
    return columns


class _InOrder:
    """Writes rows to stdout as JSONL in input order, each as soon as all earlier ones are
    out. Rows that must wait are held in memory up to `HELD`, then in a temporary file."""

    HELD = 1000

    def __init__(self) -> None:
        self.next = 0
        self.waiting: dict[int, str | tuple[int, int]] = {}
        self.held = 0
        self.spool: Any = None
        self.spooled = 0

    def offer(self, index: int, row: dict[str, Any]) -> None:
        line = json_line(row) + "\n"
        if index != self.next:
            self._hold(index, line)
            return
        sys.stdout.write(line)
        self.next += 1
        while self.next in self.waiting:
            sys.stdout.write(self._take(self.waiting.pop(self.next)))
            self.next += 1
        sys.stdout.flush()

    def _hold(self, index: int, line: str) -> None:
        if self.held < self.HELD:
            self.waiting[index] = line
            self.held += 1
            return
        import tempfile

        if self.spool is None:
            self.spool = tempfile.TemporaryFile()
        data = line.encode("utf-8")
        self.spool.write(data)
        self.spool.flush()
        self.waiting[index] = (self.spooled, len(data))
        self.spooled += len(data)

    def _take(self, held: str | tuple[int, int]) -> str:
        if isinstance(held, str):
            self.held -= 1
            return held
        import os

        offset, size = held
        return os.pread(self.spool.fileno(), size, offset).decode("utf-8")


class _Tally:
    """What the summary and the exit code need, counted as rows finish: never the rows."""

    def __init__(self) -> None:
        self.rows = 0
        self.failed = 0
        self.halted = 0
        self.failures = 0
        self.requests = 0
        self.tokens = 0
        self.answer_keys: dict[str, None] = {}
        self.first_failures: list[tuple[int, str]] = []  # a max-heap by -index of the first ones

    def add(self, entry: dict[str, Any]) -> None:
        import heapq

        self.rows += 1
        self.answer_keys.update(dict.fromkeys(entry["answers"]))
        self.requests += entry["usage"].get("requests", 0)
        self.tokens += entry["usage"].get("total_tokens", 0)
        if entry["ok"]:
            return
        self.failures += 1
        if entry.get("halted"):
            self.halted += 1
        else:
            self.failed += 1
        item = (-entry["index"], str(entry["error"]))
        if len(self.first_failures) < SHOWN_FAILURES:
            heapq.heappush(self.first_failures, item)
        elif item > self.first_failures[0]:
            heapq.heapreplace(self.first_failures, item)

    def summary(self, console: Any, request: BatchRequest, total: int, earlier: int, elapsed: float) -> None:
        ok = total - self.failed - self.halted
        target = f" → {request.output}" if request.output is not None else ""
        parts = [f"{ok} ok"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.halted:
            parts.append(f"{self.halted} halted")
        line = f"batch: {total} row{'s' if total != 1 else ''}{target}: {', '.join(parts)}"
        if earlier:
            line += f" ({earlier} done earlier, from the journal)"
        line += f" · {self.requests} requests · {self.tokens:,} tokens · {elapsed:.2f} s"
        for index, error in sorted((-i, e) for i, e in self.first_failures):
            console.file.write(f"row {index}: {visible(error)}\n")
        if self.failures > SHOWN_FAILURES:
            console.file.write(f"… and {self.failures - SHOWN_FAILURES} more failed rows (see the _error column)\n")
        console.file.write(line + "\n")
        console.file.flush()
