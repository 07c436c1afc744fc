"""Where `sd batch`'s rows run: this process's event loop, or a Dask cluster (`--workers`,
`--engine dask`). Each runner takes the batch (`BatchRun`) and returns the coroutine
function that runs its rows and hands each outcome to `BatchRun.finish`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

from .. import heap
from ..batch.journal import journal_path
from ..run.durable.effects import effects_path
from .errors import CliError, interrupts_end_the_process
from .keywords import run_keywords
from .loading import load_tools
from .model_notes import show_config_models


def _model(name: str | None, program: Any) -> Any:
    """Resolve once, up front: a missing model is one error, not one per row."""
    if not program.slots():
        return name
    show_config_models(program, name)
    from ..environment import default_environment

    return default_environment().resolve_model(name)


def local_runner(job: Any, request: Any, program: Any) -> Any:
    """The rows run on this process's event loop."""
    tools = load_tools(request.tools_file)
    model = _model(request.model, program)
    provider = job.provider
    if provider is not None and program.slots():
        provider.batch.wrap(model)  # a model without a batch API: one error, before any row
    options = {
        **run_keywords(request.flags, instrument=request.instrument, tools=tools),
        **job.run_options(),
        "on_retry": job.progress_event,
    }
    if request.output is not None:  # SPEC §25: the rows' tool effects, journaled beside the row journal
        # absolute once here: each row's run opens it by its absolute path (a relative one costs a getcwd a row)
        options["journal"] = Path(os.path.abspath(effects_path(journal_path(request.output))))
    options.pop("model", None), options.pop("tools", None)  # resolved once, above

    async def run(contexts: Iterator[dict[str, Any]]) -> None:
        from .. import api

        batch = api.complete_batch_iter_async(
            program, contexts, concurrency=request.jobs, model=model, tools=tools,
            provider_batch=provider.batch if provider is not None else None, **options,
        )  # fmt: skip
        # the first Ctrl-C ends the process at once (a blocking tool cannot hold it): every
        # finished row is in the journal already, and --resume runs the rest
        with interrupts_end_the_process(lambda: "error: " + job.interrupted_note()):
            async with aclosing(batch):
                async for position, outcome in batch:
                    job.finish(position, outcome)

    return run


def dask_runner(job: Any, request: Any, program: Any) -> Any:
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
    # the same keywords as on this process, in the form that travels (names, not objects)
    kwargs = run_keywords(request.flags, tools=_dask_tools(request.tools_file))
    kwargs["model"] = request.model
    kwargs.pop("include_paths", None)  # the job carries them
    options = job.run_options()
    if request.output is not None:  # SPEC §25: each worker writes its shard beside it (run/durable/shards.py)
        options["journal"] = effects_path(journal_path(request.output))
    try:
        from ..distributed import ship_kwargs

        ship_kwargs({**kwargs, **options})
    except (ValueError, TypeError) as exc:
        raise CliError(str(exc)) from None
    _priced_here(program, {**kwargs, **options})
    workers = request.workers or 2
    if request.address is None:  # a worker with no share of the caps would idle
        workers = max(1, min(workers, request.jobs, options["max_requests"]))

    async def run(contexts: Iterator[dict[str, Any]]) -> None:
        from .. import api

        row_retries = 2 if request.retries is None else request.retries
        executor = DaskExecutor(
            request.address, max_in_flight=request.jobs, retries=row_retries, n_workers=workers,
            keep_messages=False,  # the journal keeps answers and usage, not conversations
        )  # fmt: skip
        async with executor:
            if program.slots():
                await executor.probe(**kwargs)  # a missing model or tool: one error, not one per row
            heap.freeze_for_rows()  # the cluster's objects here (scheduler, client, nannies) live to the end too
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


def _priced_here(program: Any, options: dict[str, Any]) -> None:
    """With --max-cost, an unpriced model this process can resolve is refused here, before a
    cluster starts (SPEC §13, as the local engine does); the workers check it again, and
    check a model only they can resolve, before any row."""
    from ..environment import default_environment
    from ..run.accounting import check_batch_prices
    from ..run.ledger import Budget

    budget = Budget.of(None, options.get("max_cost"), "batch_limits")
    if budget is not None:
        check_batch_prices(default_environment(), program, options, budget, here=True)


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
