"""`sd batch`: one template over many rows, journaled row by row, output in input order."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import heap
from ..batch.journal import (
    Journal,
    JournalIndex,
    JournalLock,
    JournalReader,
    content_hash,
    finish_journal,
    journal_failure,
    journal_path,
)
from ..batch.output import confidence_columns, journal_entry, output_row
from ..batch.tables import InputRows, output_format, warn_lone_surrogates, write_table
from ..fileio import check_writable
from ..run.durable.effects import RowContext, effects_path
from ..run.durable.shards import discard
from ..wording import counted
from . import batch_report, compare
from .attachments import file_row, files_base, split_columns
from .batch_rows import NOT_RUN
from .batch_rows import Hashes as _Hashes
from .batch_rows import InOrder as _InOrder
from .batch_rows import Pending as _Pending
from .batch_rows import Tally as _Tally
from .batch_runners import dask_runner, local_runner
from .costs import otel
from .display import make_console
from .errors import EXIT_ERROR, EXIT_HALTED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNKNOWN, CliError
from .loading import load_program
from .progress import BatchProgress
from .provider_batch import ProviderBatchJob, check_flags
from .text import visible


@dataclass
class BatchRequest:
    template: Path
    inputs: Sequence[str]
    output: Path | None = None
    jobs: int = 8
    resume: bool = False
    flags: Mapping[str, Any] = field(default_factory=dict)  # the RUN_FLAGS given (cli/options.py)
    keep_journal: bool = False
    engine: str = "local"  # "local" (this process) or "dask" (struckdown.distributed)
    address: str | None = None  # the Dask scheduler; None: a private local cluster
    workers: int | None = None  # processes of a private local cluster (--workers); None: 1, or 2 with --engine dask
    provider_batch: bool = False  # requests through the provider's batch API (cli/provider_batch.py)
    batch_wait: float | None = None  # seconds a queued request waits for others (None: 30, 0: no timer)
    batch_size: int | None = None  # requests per provider batch (None: 1,000)
    approve: str = "none"  # SPEC §12: all | none decides every tool call that needs approval
    decide: str | None = None  # SPEC §29: --resume --decide happened|not-happened|deny settles unknown outcomes
    decide_row: int | None = None  # --row N (from 1): only that row's calls
    instrument: Any = None  # the tracer provider --otel made
    file_columns: Sequence[str] = ()  # columns of paths sent as images or files (cli/attachments.py)
    files_root: Path | None = None  # --files-root: the only folder those paths may lead into
    head: int | None = None  # only the first N rows, then a projection for all (batch_report)
    compare: Sequence[str] = ()  # COLUMN[=SLOT]: score answers against ground truth (compare.py)
    target_accuracy: float | None = None  # --compare on a slot with confidence=: the threshold reaching it
    options: dict[str, Any] = field(default_factory=dict)  # more keyword arguments for every row's run

    # the flags batch reads for its own work besides passing them on (journal, engines, caps)
    @property
    def model(self) -> str | None:
        return self.flags.get("model")

    @property
    def tools_file(self) -> Path | None:
        return self.flags.get("tools")

    @property
    def include_paths(self) -> Sequence[Path]:
        return tuple(self.flags.get("include_path") or ())

    @property
    def max_requests(self) -> int | None:  # None: 2 x jobs
        return self.flags.get("max_requests")

    @property
    def retries(self) -> int | None:  # per request (SPEC §14); Dask: also runs of a row again (None: 2)
        return self.flags.get("retries")

    @property
    def mcp(self) -> Sequence[str]:
        return tuple(self.flags.get("mcp") or ())

    @property
    def mcp_config(self) -> Path | None:
        return self.flags.get("mcp_config")

    @property
    def otel(self) -> bool:
        return bool(self.flags.get("otel"))

    @property
    def cache(self) -> bool:
        return not self.flags.get("no_cache")


def batch_command(request: BatchRequest) -> int:
    from .approval_cmd import approve_flag

    approve_flag(request.approve)  # all | none, before any row runs
    check_flags(request.provider_batch, request.batch_wait, request.batch_size, request.engine)
    program = load_program(request.template, request.include_paths)
    if request.output is not None:
        output_format(request.output)
        check_writable(request.output)
    elif request.resume:
        raise CliError("--resume needs -o OUTPUT: the journal lives beside the output file")
    check_decide(request)
    if request.provider_batch and (request.engine != "local" or (request.workers or 1) > 1):
        flag = "--workers" if request.engine == "local" else "--engine dask"
        raise CliError(f"--provider-batch and {flag} cannot be combined: a provider batch gathers the rows' requests "
                       "in one process (the provider runs them); drop one of the two")
    if request.otel and (request.engine != "local" or (request.workers or 1) > 1):
        raise CliError("--otel is for this process's rows (the Dask workers export their own traces)")
    _refuse_escalate_approve(program, request)
    inputs = InputRows(request.inputs)
    lock = JournalLock(journal_path(request.output)) if request.output is not None else None
    try:
        with otel(request.otel) as request.instrument:
            return BatchRun(request, program, inputs).run()
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
    job = {"template": program.template.source, "includes": includes, "model": request.model or model_env, "tools": tools}
    if request.mcp or request.mcp_config is not None:  # MCP servers decide answers too (no key: older journals match)
        job["mcp"] = [*request.mcp, *_config_text(request.mcp_config)]
    if request.approve == "all":  # allowed calls give other answers than denied ones
        job["approve"] = "all"
    aliases = _alias_targets(program, request.model)
    if aliases:  # where config aliases lead: an alias pointed somewhere new gives other answers
        job["aliases"] = aliases
    return content_hash(job)


def _alias_targets(program: Any, model: Any) -> list[str]:
    from ..models import config_origin
    from .model_notes import model_names

    return [note for name in model_names(program, model) if (note := config_origin(name)) is not None]


def _config_text(config: Path | None) -> list[str]:
    if config is None:
        return []
    try:
        return [content_hash(config.read_text(encoding="utf-8", errors="replace"))]
    except OSError:
        return ["unreadable"]


class BatchRun:
    """One `sd batch`, in three passes over the inputs, none holding the rows:

    1. `scan`: read every row once before any model call (a broken input line is an
       error before anything is paid), count them (`--head N`: only the first N are
       the job's), note the input columns, and decide from the journal which rows
       are done (`--resume`);
    2. `run`: read them again, lazily, as the batch takes them; each finished row
       goes to the journal (`finish`), the progress bar and the tallies at once;
    3. `assemble`: read them a third time and write the output in input order,
       each row with its journal line, read back by offset.

    Without `-o` there is no journal: rows go to stdout in input order as they
    finish (`_InOrder`). Per-row state is a few bytes (hashes, flags, offsets);
    `--compare` keeps each row's compared cells (the column and the answer) and
    `--provider-batch` each row's index, nothing more.

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
        self.total = 0  # the job's rows (with --head, at most N)
        self.all_rows = 0  # the rows the inputs hold
        self.columns: dict[str, None] = {}  # input columns, first seen first
        self.hashes = bytearray()  # each row's input hash (8 bytes)
        self.skip = bytearray()  # 1: done in the journal (--resume)
        self.done_before = 0
        self.inflight: dict[int, tuple[int, dict[str, Any]]] = {}  # batch position -> (row index, row)
        self.taken: dict[int, float] = {}  # batch position -> when the batch took the row
        self.tally = _Tally()
        self.tally.keep_usages = request.head is not None
        self.stdout = _InOrder() if request.output is None else None
        self.renames: dict[str, str] = {}  # answer key -> its column, where it clashes with an input column
        self.file_columns = split_columns(request.file_columns)
        self.file_base: Path | None = None
        self.compared: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}  # --compare: index -> (cells, entry)
        self.provider: ProviderBatchJob | None = None
        self.comparisons: list[Any] = []
        self.confident = confidence_columns(program)  # SPEC §27: slot -> its _confidence column

    # -- the passes -------------------------------------------------------------------

    def run(self) -> int:
        request = self.request
        if request.output is not None:
            self.index = JournalIndex.read(journal_path(request.output), self.fingerprint)
            finished = self.index.finished
            if finished is not None and request.resume:  # SPEC §29: a finished job runs nothing again
                rows = int(finished.get("rows") or 0)
                self.console.file.write(f"already finished: {counted(rows, 'row')} in {finished.get('output')}\n")
                self.console.file.flush()
                return EXIT_OK
            if finished is not None:
                self.index = JournalIndex()  # a new run of a finished job: it starts over
            if self.index.lines and not request.resume:
                raise CliError(
                    f"{journal_path(request.output)} holds {self.index.lines} finished rows from an earlier run: "
                    "pass --resume to continue it, or delete it to start over"
                )
        self.scan()
        self.index.reserve(self.total)
        self.check_columns()
        if request.output is not None:
            self._resume_note()
            self.journal = Journal(journal_path(request.output), fresh=not request.resume)
            if request.decide is not None:
                decide_unknown(effects_path(self.journal.path), request.decide, request.decide_row, self.console)
        if request.provider_batch:
            self.provider = ProviderBatchJob(
                self.journal, _Pending(self.skip), _Hashes(self.hashes), self.fingerprint, self.console,
                resume=request.resume, batch_size=request.batch_size, batch_wait=request.batch_wait,
            )  # fmt: skip
        try:
            runner = self._runner()  # a model, tools file or price refused here: the journal is closed too
        except BaseException:
            if self.journal is not None:
                self.close_journal(failing=True)
            raise
        started = time.perf_counter()
        progress = BatchProgress(self.console, self.total, self.done_before, concurrency=request.jobs)
        self.progress = progress
        if self.provider is not None:
            self.provider.progress = progress
        heap.freeze_for_rows()  # the rows run without the start-up heap in the collections (heap.py)
        try:
            with progress:
                if self.total > self.done_before:  # else nothing to run: no cluster to start
                    asyncio.run(runner(self.contexts()))
        except KeyboardInterrupt:
            raise CliError(self.interrupted_note(), EXIT_INTERRUPTED) from None
        finally:
            heap.thaw()
            if self.journal is not None:
                self.close_journal(failing=sys.exc_info()[1] is not None)
        if request.output is not None and self.journal is not None:
            self.assemble(request.output, self.journal.path)
            if not (self.tally.failures or self.tally.unrun or self.tally.unknown) and not request.keep_journal:
                # the row journal becomes its `finished` record first: a kill after it
                # leaves a job that resumes to nothing (SPEC §29)
                finish_journal(self.journal.path, rows=self.total, output=request.output,
                               template_hash=self.fingerprint)
                discard(effects_path(self.journal.path))  # with the shards of --workers / Dask
        elapsed = time.perf_counter() - started
        self.tally.summary(self.console, request, self.total, self.done_before, elapsed)
        self.report(elapsed)
        if self.tally.failed or self.tally.unrun:
            return EXIT_ERROR
        if self.tally.unknown:
            return EXIT_UNKNOWN
        return EXIT_HALTED if self.tally.halted else EXIT_OK

    def scan(self) -> None:
        """Pass 1: every row read and checked once; hashes, columns, rows done."""
        head = self.request.head
        for spec, number, row in self.inputs.numbered():
            self.all_rows += 1
            if head is not None and self.total >= head:
                continue  # counted for the projection, not run
            index = self.total
            self.total += 1
            warn_lone_surrogates(spec, number, row, _warn)
            self.columns.update(dict.fromkeys(row))
            digest = content_hash(row)
            self.hashes += bytes.fromhex(digest)
            reused = self.index.reusable(index, digest)
            self.skip.append(reused)
            self.done_before += reused

    def check_columns(self) -> None:
        """After the scan, before any row runs: `--file-columns` and `--compare` name
        columns the inputs have; answers never overwrite an input column."""
        columns, request = list(self.columns), self.request
        self.file_base = files_base(columns, self.total, request.file_columns, request.inputs, request.files_root)
        if request.compare:
            self.comparisons = compare.comparisons(request.compare, self.program, columns)
        self.renames = batch_report.answer_columns(columns, self.program.keys, _warn)
        if request.flags.get("strict") and self.total:
            self.check_strict(columns)

    def check_strict(self, columns: list[str]) -> None:
        """--strict: a name the template reads that no input column has would fail every
        row; refused once, before any row runs, with the column it is most likely a typo of."""
        from ..variables import missing

        absent = missing(self.program, columns)
        if not absent:
            return
        found = []
        for read in absent:
            where = f"line {read.pos.line}" + (f" of {read.pos.filename}" if read.pos.filename else "")
            close = read.close_match(columns)
            found.append(f"no input column has {read.name!r} (read at {where})" + (f"; did you mean {close!r}?" if close else ""))
        raise CliError(f"--strict: {'; '.join(found)} Columns: {', '.join(columns) or 'none'}")

    def contexts(self) -> Iterator[dict[str, Any]]:
        """Pass 2: the rows still to run, read again as the batch takes them."""
        position = 0
        for index, row in enumerate(self.inputs):
            if index >= self.total:
                break
            if self.skip[index]:
                continue
            if content_hash(row) != self.input_hash(index):
                raise self._changed(index)
            self.inflight[position] = (index, row)
            self.taken[position] = time.perf_counter()  # the row's own time, for the progress's rate
            position += 1
            yield RowContext(self.prepare(row), row=index)  # effect ids name the input row (SPEC §25)

    def prepare(self, row: dict[str, Any]) -> dict[str, Any]:
        """The context a row runs with: the row, its `--file-columns` paths read as files."""
        if self.file_base is None:
            return row
        return file_row(row, self.file_columns, self.file_base)

    def finish(self, position: int, outcome: Any) -> None:
        """A row finished: journal it, count it, show it."""
        index, row = self.inflight.pop(position)
        taken = self.taken.pop(position, None)
        seconds = time.perf_counter() - taken if taken is not None else None
        entry = journal_entry(index, outcome, self.input_hash(index), self.fingerprint)
        if self.provider is not None:
            self.provider.annotate(position, entry)
        if self.journal is not None:
            try:
                offset = self.journal.record(entry)
            except OSError as exc:
                raise CliError(self.journal_failed(exc), code=EXIT_ERROR) from None
            self.index.note(index, offset, entry["ok"], bool(entry.get("unknown")))
        self.tally.add(entry, getattr(outcome, "reruns", None))
        heap.row_finished(self.tally.rows)
        if not isinstance(outcome, BaseException):
            self.progress.truncated += sum(1 for slot in outcome.results.values() if slot.truncated)
        self.progress.advance(entry["ok"], unrun=bool(entry.get("not_run")), seconds=seconds)
        if self.stdout is not None:
            self.compare_cells(index, row, entry)
            self.stdout.offer(index, output_row(row, entry, self.renames, self.confident))

    def assemble(self, output: Path, journal: Path) -> None:
        """Pass 3: the output in input order, each row beside its journal line."""
        reader = JournalReader(journal)

        def rows() -> Iterator[dict[str, Any]]:
            for index, row in enumerate(self.inputs):
                if index >= self.total:
                    break
                offset = self.index.offset(index)
                if offset < 0:
                    raise self._changed(index)
                entry = reader.entry(offset)
                if entry.get("input_hash") != content_hash(row):
                    raise self._changed(index)
                self.compare_cells(index, row, entry)
                yield output_row(row, entry, self.renames, self.confident)

        try:
            write_table(output, rows(), self.output_columns())
        finally:
            reader.close()

    def compare_cells(self, index: int, row: dict[str, Any], entry: dict[str, Any]) -> None:
        """`--compare`: keep the row's compared column and answer (every row's: the scores need them all)."""
        if not self.comparisons:
            return
        self.compared[index] = compare.kept_cells(self.comparisons, row, entry)

    def report(self, elapsed: float) -> None:
        """After the summary line: provider batches, `--head`'s projection, `--compare`'s scores."""
        console, request = self.console, self.request
        if self.provider is not None:
            console.file.write(self.provider.summary() + "\n")
        if request.head is not None:
            projected = batch_report.projection(self.tally.usages, elapsed, self.all_rows, request.jobs)
            if projected:
                console.file.write(projected + "\n")
        if request.compare:
            ordered = [self.compared[i] for i in sorted(self.compared)]
            rows, entries = [cells for cells, _ in ordered], [entry for _, entry in ordered]
            console.file.write(compare.compare_report(
                request.compare, self.program, rows, entries, list(self.columns), request.target_accuracy
            ) + "\n")
        console.file.flush()

    # -- pieces -----------------------------------------------------------------------

    def input_hash(self, index: int) -> str:
        return self.hashes[8 * index : 8 * index + 8].hex()

    def output_columns(self) -> list[str]:
        """Input columns, then answers in template order, then `_error` if a row failed."""
        keys = self.program.keys
        answered = {**self.index.answer_keys, **self.tally.answer_keys}
        ranked = sorted(answered, key=lambda k: keys.index(k) if k in keys else len(keys))
        columns = list(self.columns)
        columns += [c for c in (self.renames.get(k, k) for k in ranked) if c not in self.columns]
        columns += [c for c in self.confident.values() if c not in columns]
        if self.tally.failures:
            columns.append("_error")
        if self.tally.unknown:
            columns.append("_unknown")
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
        waiting = sum(1 for flag in index.flags if flag & 4)
        unrun = sum(1 for flag in index.flags if flag & 8)
        unknown = sum(1 for flag in index.flags if flag & 16)
        failed = index.lines - ok_lines - waiting - unrun - unknown
        note = f"resuming {path}: {self.done_before:,} of {counted(self.total, 'row')} done"
        if failed:
            note += f", {counted(failed, 'failed row')} run again"
        if unrun:
            note += f"; {counted(unrun, 'row')} {NOT_RUN} (run now)"
        if unknown:
            how = f"decided {request.decide}" if request.decide else "still undecided: --decide settles them"
            note += f"; {counted(unknown, 'row')} with a call of unknown outcome run again ({how})"
        if stale:
            note += f", {counted(stale, 'row')} whose input or job (template, includes, model, tools) changed run again"
        if index.bad:
            note += f" ({counted(index.bad, 'unreadable journal line')} ignored)"
        self.console.file.write(note + "\n")

    def run_options(self) -> dict[str, Any]:
        """Keyword arguments every row's run gets, on either engine."""
        request = self.request
        return {
            "on_halt": "return",
            "max_requests": request.max_requests or 2 * request.jobs,
            "approve": request.approve == "all",
            **request.options,
        }

    def journal_failed(self, exc: OSError) -> str:
        assert self.journal is not None
        return journal_failure(self.journal.path, exc, self.done_before + self.journal.recorded, self.total)

    def close_journal(self, *, failing: bool) -> None:
        """Close the journal; a failure to (a full disk refusing the last flush) is the
        batch's error, unless the batch is already failing, whose error then speaks."""
        assert self.journal is not None
        try:
            self.journal.close()
        except OSError as exc:
            if not failing:
                raise CliError(self.journal_failed(exc), code=EXIT_ERROR) from None

    def interrupted_note(self) -> str:
        done = self.done_before + self.tally.rows
        where = f"saved in {self.journal.path}; run the same command with --resume" if self.journal else "written above"
        return f"interrupted: {done:,}/{counted(self.total, 'row')} {'is' if self.total == 1 else 'are'} {where}"

    def progress_event(self, event: Any) -> None:
        """A retry or a fallback in some row (`on_retry`): the progress bar counts it."""
        self.progress.resilience_event(event)

    def _runner(self) -> Any:
        workers = self.request.workers
        if self.request.engine != "local" or (workers is not None and workers > 1):
            return dask_runner(self, self.request, self.program)
        return local_runner(self, self.request, self.program)


DECISIONS = ("happened", "not-happened", "deny")


def _refuse_escalate_approve(program: Any, request: BatchRequest) -> None:
    """SPEC §29: `escalate=approve` hands a less confident answer to a person, and a batch has
    none to ask (rows cannot pause): refused before any call, naming both. `--approve all`
    keeps the model's answers, so it is allowed."""
    from ..run.confidence import asks_a_person

    slots = asks_a_person(program)
    if not slots or request.approve == "all":
        return
    workers = " with --workers" if (request.workers or 1) > 1 or request.engine != "local" else ""
    raise CliError(
        f"slot {slots[0]!r} has escalate=approve, and sd batch{workers} has no person to answer it (its rows "
        "cannot pause): give escalate=a model instead, or --approve all to keep the model's answers"
    )


def check_decide(request: BatchRequest) -> None:
    """`--decide` and `--row` before anything runs: they settle a journal's calls of unknown outcome."""
    if request.decide is not None and request.decide not in DECISIONS:
        raise CliError(f"--decide takes happened, not-happened or deny, not {request.decide!r}")
    if request.decide is not None and not request.resume:
        raise CliError("--decide settles the calls of unknown outcome a journal holds: give it with --resume")
    if request.decide_row is not None and request.decide is None:
        raise CliError("--row names the row whose call --decide settles: give --decide too")


def decide_unknown(path: Path, decide: str, row: int | None, console: Any) -> None:
    """SPEC §29: write the user's decision about each call of unknown outcome (of row N, or
    all) into the effect journal, before any row runs: `happened` makes it done (the model
    reads that it happened), `not-happened` clears it (it runs now), `deny` makes it done
    as denied (it never runs; the model reads the denial)."""
    from ..approval.state import DENIED, Happened
    from ..run.durable.effects import acquire, release

    journal = acquire(path)
    try:
        calls = journal.undecided(None if row is None else row - 1)
        if not calls:
            where = f"row {row}" if row is not None else "this job"
            console.file.write(f"--decide {decide}: no call of unknown outcome waits in {where}\n")
            return
        for record in calls:
            effect = str(record["effect"])
            if decide == "happened":
                journal.done(effect, Happened().result, True, None, decided="happened")
            elif decide == "deny":
                journal.done(effect, DENIED, False, DENIED, decided="deny")
            else:
                journal.decided(effect, "not-happened")
        console.file.write(f"--decide {decide}: {counted(len(calls), 'call')} of unknown outcome settled\n")
    finally:
        release(journal)


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {visible(message)}\n")
