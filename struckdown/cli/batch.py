"""`sd batch`: one template over many rows, journaled row by row, output in input order."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import batch_report, compare, loading
from .attachments import file_base, file_contexts
from .costs import batch_cost, budget_options, not_run, otel, row_usage
from .display import make_console
from .errors import EXIT_ERROR, EXIT_HALTED, EXIT_INTERRUPTED, EXIT_OK, CliError, describe
from .journal import Journal, JournalLock, content_hash, journal_path, read_journal
from .loading import load_program, load_tools
from .model_notes import show_config_models
from .progress import BatchProgress
from .provider_batch import BatchJob, check_flags
from .tables import columns_of, json_line, output_format, read_inputs, write_table
from .text import visible

SHOWN_FAILURES = 5


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
    provider_batch: bool = False  # requests through the provider's batch API (cli/provider_batch.py)
    batch_wait: float | None = None  # seconds a queued request waits for others (None: 30, 0: no timer)
    batch_size: int | None = None  # requests per provider batch (None: 1,000)
    mcp: Sequence[str] = ()  # --mcp servers
    mcp_config: Path | None = None  # --mcp-config FILE
    approve: str = "none"  # SPEC §12: all | none decides every tool call that needs approval
    prices_file: Path | None = None  # --prices FILE
    max_cost: float | None = None  # --max-cost USD: the whole batch's budget
    otel: bool = False  # --otel
    instrument: Any = None  # the tracer provider --otel made
    file_columns: Sequence[str] = ()  # columns of paths sent as images or files (cli/attachments.py)
    head: int | None = None  # only the first N rows, then a projection for all (batch_report)
    compare: Sequence[str] = ()  # COLUMN[=SLOT]: score answers against ground truth (compare.py)
    total_rows: int | None = None  # how many rows the inputs hold (set when reading them)
    retries: int | None = None  # per request (SPEC §14); Dask: also runs of a row again (None: 2)
    max_tokens: int | None = None
    fallback: Sequence[str] = ()


def batch_command(request: BatchRequest) -> int:
    from .approval_cmd import approve_flag

    approve_flag(request.approve)  # all | none, before any row runs
    check_flags(request.provider_batch, request.batch_wait, request.batch_size, request.engine)
    program = load_program(request.template, request.include_paths)
    rows = read_inputs(request.inputs, warn=_warn)
    file_base(rows, request.file_columns, request.inputs)  # a bad --file-columns fails before anything runs
    rows, request.total_rows = batch_report.head_rows(rows, request.head)
    if request.compare:  # a bad column or slot fails before any row runs
        compare.comparisons(request.compare, program, columns_of(rows))
    if request.output is not None:
        output_format(request.output)
    elif request.resume:
        raise CliError("--resume needs -o OUTPUT: the journal lives beside the output file")
    lock = JournalLock(journal_path(request.output)) if request.output is not None else None
    if request.otel and request.engine != "local":
        raise CliError("--otel is for --engine local (the Dask workers export their own traces)")
    try:
        with otel(request.otel) as request.instrument:
            return _run_batch(request, program, rows)
    finally:
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
    return content_hash(job)


def _config_text(config: Path | None) -> list[str]:
    if config is None:
        return []
    try:
        return [content_hash(config.read_text(encoding="utf-8", errors="replace"))]
    except OSError:
        return ["unreadable"]


def _run_batch(request: BatchRequest, program: Any, rows: list[dict[str, Any]]) -> int:
    template_hash = job_fingerprint(request, program)
    input_hashes = [content_hash(row) for row in rows]
    console = make_console(sys.stderr)
    entries, journal = _open_journal(request, rows, input_hashes, template_hash, console)
    pending = [i for i in range(len(rows)) if i not in entries]
    job = None
    if request.provider_batch:
        job = BatchJob(journal, pending, input_hashes, template_hash, console, resume=request.resume,
                       batch_size=request.batch_size, batch_wait=request.batch_wait)  # fmt: skip
    contexts = file_contexts([rows[i] for i in pending], request.file_columns, request.inputs)
    progress_box: list[BatchProgress] = []
    run = (
        _dask_runner(request, program)
        if request.engine != "local"
        else _local_runner(request, program, job, lambda event: progress_box[0].resilience_event(event))
    )
    stdout = _InOrder() if request.output is None else None
    finished_now: list[dict[str, Any]] = []
    renames = batch_report.answer_columns(columns_of(rows), program.keys, _warn)  # never over an input column

    def on_result(position: int, outcome: Any) -> None:
        index = pending[position]
        entry = journal_entry(index, outcome, input_hashes[index], template_hash)
        if job is not None:
            job.annotate(position, entry)
        if journal is not None:
            try:
                journal.record(entry)
            except OSError as exc:
                raise CliError(f"cannot write journal {journal.path}: {exc}", code=EXIT_ERROR) from None
        entries[index] = entry
        finished_now.append(entry)
        if not isinstance(outcome, BaseException):
            progress.truncated += sum(1 for slot in outcome.results.values() if slot.truncated)
        progress.advance(entry["ok"])
        if stdout is not None:
            stdout.offer(index, output_row(rows[index], entry, renames))

    started = time.perf_counter()
    progress = BatchProgress(console, len(rows), len(entries))
    if job is not None:
        job.progress = progress
    progress_box.append(progress)
    try:
        with progress:
            asyncio.run(run(contexts, on_result))
    except KeyboardInterrupt:
        where = f"saved in {journal.path}; run the same command with --resume" if journal else "written above"
        raise CliError(f"interrupted: {len(entries)}/{len(rows)} rows are {where}", EXIT_INTERRUPTED) from None
    finally:
        if journal is not None:
            journal.close()
    ordered = [entries[i] for i in range(len(rows))]
    if request.output is not None:
        out_rows = [output_row(row, entry, renames) for row, entry in zip(rows, ordered)]
        write_table(request.output, out_rows, output_columns(rows, ordered, program.keys, renames))
        if journal is not None and all(e["ok"] for e in ordered) and not request.keep_journal:
            journal.path.unlink(missing_ok=True)
    _summary(console, request, ordered, finished_now, time.perf_counter() - started)
    if job is not None:
        console.file.write(job.summary() + "\n")
    _report(console, request, program, rows, ordered, finished_now, time.perf_counter() - started)
    if any(not e["ok"] and not e.get("halted") for e in ordered):
        return EXIT_ERROR
    return EXIT_HALTED if any(e.get("halted") for e in ordered) else EXIT_OK


def _warn(message: str) -> None:
    sys.stderr.write(f"warning: {visible(message)}\n")


def _open_journal(
    request: BatchRequest, rows: list[dict[str, Any]], input_hashes: list[str], template_hash: str, console: Any
) -> tuple[dict[int, dict[str, Any]], Journal | None]:
    """Rows the journal already holds as done (with --resume), and the journal to append to."""
    if request.output is None:
        return {}, None
    path = journal_path(request.output)
    previous, bad = read_journal(path)
    if previous and not request.resume:
        raise CliError(
            f"{path} holds {len(previous)} finished rows from an earlier run: "
            "pass --resume to continue it, or delete it to start over"
        )
    done = {
        i: e
        for i, e in previous.items()
        if e.get("ok") and i < len(rows) and e.get("input_hash") == input_hashes[i] and e.get("template_hash") == template_hash
    }
    stale = sum(1 for i, e in previous.items() if e.get("ok") and i not in done)
    waiting = sum(1 for i, e in previous.items() if not e.get("ok") and not e.get("error") and "provider_batch" in e)
    if request.resume and not previous:
        console.file.write(f"nothing to resume in {path} (none yet, or every row succeeded): running every row\n")
    elif request.resume:
        failed = len(previous) - len(done) - stale - waiting
        note = f"resuming {path}: {len(done)} of {len(rows)} rows done"
        if failed:
            note += f", {failed} failed rows run again"
        if stale:
            note += f", {stale} rows whose input or job (template, includes, model, tools) changed run again"
        if bad:
            note += f" ({bad} unreadable journal lines ignored)"
        console.file.write(note + "\n")
    return done, Journal(path, fresh=not request.resume)


def _model(name: str | None, program: Any) -> Any:
    """Resolve once, up front: a missing model is one error, not one per row."""
    model = loading.resolve_cli_model(name)  # via the module: tests patch it
    if not program.slots():
        return model
    show_config_models(program, model)
    from ..environment import default_environment

    return default_environment().resolve_model(model)


def _local_runner(request: BatchRequest, program: Any, job: BatchJob | None = None, on_retry: Any = None) -> Any:
    """The rows run on this process's event loop."""
    tools = load_tools(request.tools_file)
    mcp = loading.load_mcp(request.mcp, request.mcp_config)
    model = _model(request.model, program)
    if job is not None and program.slots():
        job.batch.wrap(model)  # a model without a batch API: one error, before any row

    async def run(contexts: list[dict[str, Any]], on_result: Any) -> None:
        if not contexts:
            return
        from ..api import complete_batch_async
        from .run_cmd import resilience_options

        await complete_batch_async(
            program,
            contexts,
            concurrency=request.jobs,
            on_result=on_result,
            model=model,
            tools=tools,
            cache=request.cache,
            on_halt="return",
            max_requests=request.max_requests or 2 * request.jobs,
            provider_batch=job.batch if job is not None else None,
            mcp=mcp,
            approve=request.approve == "all",
            **budget_options(request.prices_file, request.max_cost, request.instrument),
            on_retry=on_retry,
            **resilience_options(request.retries, request.max_tokens, request.fallback),
        )

    return run


def _dask_runner(request: BatchRequest, program: Any) -> Any:
    """`--engine dask`: the rows run on a Dask cluster (struckdown.distributed).

    Only names travel: the model string (also a `package.module:factory` name) and
    the tools as a file shipped as text or a module name. The model, tools and deps
    are resolved once on a worker before any row runs.
    """
    if request.engine != "dask":
        raise CliError(f"unknown engine {request.engine!r}: use local or dask")
    try:
        from ..distributed import DaskExecutor
    except ImportError as exc:
        raise CliError(f"--engine dask: {exc}") from None
    kwargs: dict[str, Any] = {
        "model": request.model, "tools": _dask_tools(request.tools_file), "approve": request.approve == "all",
    }
    mcp = loading.load_mcp(request.mcp, request.mcp_config)
    if mcp is not None:
        kwargs["mcp"] = mcp
    kwargs.update(budget_options(request.prices_file, request.max_cost, None))
    if request.retries is not None:  # per request on the workers too (and row re-runs, in the executor)
        kwargs["retries"] = request.retries
    if request.fallback:
        raise CliError("--fallback is not available with --engine dask: the workers use their own model only")
    if request.max_tokens is not None:
        kwargs["settings"] = {"max_tokens": request.max_tokens}
    try:
        from ..distributed import ship_kwargs

        ship_kwargs(kwargs)
    except ValueError as exc:
        raise CliError(str(exc)) from None

    async def run(contexts: list[dict[str, Any]], on_result: Any) -> None:
        if not contexts:
            return
        from ..api import complete_batch_async

        row_retries = 2 if request.retries is None else request.retries
        async with DaskExecutor(request.address, max_in_flight=request.jobs, retries=row_retries) as executor:
            if program.slots():
                await executor.probe(**kwargs)  # a missing model or tool: one error, not one per row
            await complete_batch_async(
                program,
                contexts,
                concurrency=2 * request.jobs,  # queued at the scheduler; -j caps how many run
                on_result=on_result,
                template_path=request.template,
                include_paths=request.include_paths,
                executor=executor,
                cache=request.cache,
                on_halt="return",
                **kwargs,
            )

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
        f"--tools {tools}: with --engine dask give a .py file (shipped to the workers) "
        "or a module importable on the workers (package.module or package.module:function)"
    )


def journal_entry(index: int, outcome: Any, input_hash: str, template_hash: str) -> dict[str, Any]:
    """One journal line for a finished row (a Result, or the exception it failed with)."""
    entry: dict[str, Any] = {"index": index, "ok": False, "answers": {}, "error": None, "usage": {}, "halted": None}
    if isinstance(outcome, BaseException):
        entry.update(error=describe(outcome), usage=row_usage(outcome))  # a failed row's requests count too
        if not_run(outcome):
            entry["not_run"] = True  # the batch budget kept it from starting: --resume runs it
    else:
        halted = outcome.halted
        usage = outcome.usage.to_dict()
        if getattr(outcome.usage, "cost", None) is not None:  # what --head projects (prices known)
            usage.setdefault("cost", outcome.usage.cost)
        entry.update(answers=outcome.to_dict(), usage=usage, ok=halted is None)
        if halted is not None:
            entry.update(error=describe(halted), halted={"slot": halted.slot, "reason": halted.reason})
    entry.update(input_hash=input_hash, template_hash=template_hash)
    return entry


def output_row(row: dict[str, Any], entry: dict[str, Any], renames: dict[str, str] | None = None) -> dict[str, Any]:
    out = {**row, **batch_report.renamed(entry["answers"], renames or {})}
    if not entry["ok"]:
        out["_error"] = entry["error"]
    return out


def output_columns(
    rows: list[dict[str, Any]], entries: list[dict[str, Any]], keys: Sequence[str], renames: dict[str, str] | None = None
) -> list[str]:
    """Input columns, then answers in template order, then `_error` if a row failed."""
    columns = columns_of(rows)
    answered = columns_of(e["answers"] for e in entries)
    ranked = sorted(answered, key=lambda k: keys.index(k) if k in keys else len(keys))
    columns += [c for c in ((renames or {}).get(k, k) for k in ranked) if c not in columns]
    if any(not e["ok"] for e in entries):
        columns.append("_error")
    return columns


class _InOrder:
    """Writes rows to stdout as JSONL in input order, each as soon as all earlier ones are out."""

    def __init__(self) -> None:
        self.next = 0
        self.waiting: dict[int, dict[str, Any]] = {}

    def offer(self, index: int, row: dict[str, Any]) -> None:
        self.waiting[index] = row
        while self.next in self.waiting:
            sys.stdout.write(json_line(self.waiting.pop(self.next)) + "\n")
            self.next += 1
        sys.stdout.flush()


def _report(
    console: Any, request: BatchRequest, program: Any, rows: list[dict[str, Any]], ordered: list[dict[str, Any]],
    finished_now: list[dict[str, Any]], elapsed: float,
) -> None:
    """--head's projection and --compare's scores, after the summary line."""
    if request.head is not None:
        projected = batch_report.projection(finished_now, elapsed, request.total_rows or len(rows), request.jobs)
        if projected:
            console.file.write(projected + "\n")
    if request.compare:
        console.file.write(compare.compare_report(request.compare, program, rows, ordered, columns_of(rows)) + "\n")
    console.file.flush()


def _summary(
    console: Any, request: BatchRequest, ordered: list[dict[str, Any]], finished_now: list[dict[str, Any]], elapsed: float
) -> None:
    halted = sum(1 for e in ordered if e.get("halted"))
    unrun = sum(1 for e in ordered if e.get("not_run"))
    failed = sum(1 for e in ordered if not e["ok"]) - halted - unrun
    ok = len(ordered) - failed - halted - unrun
    target = f" → {request.output}" if request.output is not None else ""
    parts = [f"{ok} ok"]
    if failed:
        parts.append(f"{failed} failed")
    if halted:
        parts.append(f"{halted} halted")
    if unrun:
        parts.append(f"{unrun} not run (budget spent; --resume runs them)")
    line = f"batch: {len(ordered)} row{'s' if len(ordered) != 1 else ''}{target}: {', '.join(parts)}"
    earlier = len(ordered) - len(finished_now)
    if earlier:
        line += f" ({earlier} done earlier, from the journal)"
    requests = sum(e["usage"].get("requests", 0) for e in finished_now)
    tokens = sum(e["usage"].get("total_tokens", 0) for e in finished_now)
    line += f" · {requests} requests · {tokens:,} tokens"
    cost = batch_cost(finished_now)
    line += f" · {cost}" if cost is not None else ""
    line += f" · {elapsed:.2f} s"
    failures = [e for e in ordered if not e["ok"] and not e.get("not_run")]
    for entry in failures[:SHOWN_FAILURES]:
        console.file.write(f"row {entry['index']}: {visible(str(entry['error']))}\n")
    if len(failures) > SHOWN_FAILURES:
        console.file.write(f"… and {len(failures) - SHOWN_FAILURES} more failed rows (see the _error column)\n")
    console.file.write(line + "\n")
    console.file.flush()
