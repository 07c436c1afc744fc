"""The front door (SPEC §10): an Environment owns everything a run is configured by.

Like Jinja's `Environment`, it holds the registries (types, actions), the
sandbox (a `Renderer` with its caches), the compiled-program and agent caches,
and the run defaults. Every stage receives it: `parse` runs syntax → check →
plan against it, and the engine runs the Program it made. Two environments in
one process share none of it. `sd.complete(...)` is
`sd.default_environment().complete(...)`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol, Unpack

from .actions import ActionRegistry, builtin_actions
from .authority import PERMISSIVE, HostPolicy
from .lru import LRU
from .models.store import ModelStore
from .plan import Program
from .render import Renderer
from .run_options import EXECUTOR_OPTIONS as _EXECUTOR_OPTIONS
from .run_options import OPTIONS, BatchExecutor, PathLike, RunOptions, checked_options, option_value
from .run_options import RUN_OPTIONS as _RUN_OPTIONS
from .types import TypeFactory, TypeRegistry

if TYPE_CHECKING:
    from pydantic_ai.capabilities import BatchModelRequests
    from pydantic_ai.usage import UsageLimits

    from .batch.provider import ProviderBatch
    from .results import Result
    from .run_options import ModelLike
    from .syntax.nodes import Template

_PROGRAM_CACHE_SIZE = 256


class TemplateCache(Protocol):
    """Where an Environment keeps parsed templates between processes (`template_cache=`):
    `syntax.stored.TemplateStore` keeps them as files."""

    def parse(self, source: str, *, template_path: str | None, include_paths: Sequence[str]) -> Template: ...

#: Seconds one tool call may take unless the host says otherwise (None: no limit).
DEFAULT_TOOL_TIMEOUT: float = OPTIONS["tool_timeout"].default


class Environment:
    """Registries, sandbox, caches and run defaults for the templates it parses and runs."""

    def __init__(self, *, template_cache: TemplateCache | None = None, **defaults: Unpack[RunOptions]) -> None:
        """`defaults`: any run keyword that is not per call only (`run_options.OPTIONS`), the
        default of every run of this Environment; a keyword given to a call overrides it.
        `template_cache`: where parsed templates are kept between processes, as Jinja's
        `bytecode_cache=` (`struckdown.syntax.stored.TemplateStore(directory)`; the `sd`
        commands give theirs one in the cache folder). None: parsed in memory only."""
        unknown = set(defaults) - _RUN_OPTIONS
        if unknown:
            from .compat.calls import call_options

            call_options("Environment", defaults, self, _RUN_OPTIONS)  # the TypeError with a close match
        self.defaults: dict[str, Any] = checked_options(defaults, environment=True)
        if defaults.get("mcp") is not None:  # a bad server spec fails here, not at the first run
            from .tools.mcp import resolve_servers

            resolve_servers(defaults["mcp"])
        self.types = TypeRegistry()
        self.actions: ActionRegistry = builtin_actions()
        self.renderer = Renderer()
        self.models = ModelStore()  # models built from strings, and their run defaults
        # SPEC §30: what runs of this Environment may reach (models, files, code, network); a host
        # such as `sd serve` sets a restrictive one. The default allows everything (the CLI's user).
        self.policy: HostPolicy = PERMISSIVE
        self.response_caches: dict[Any, Any] = {}  # on-disk response caches by directory
        self.template_cache = template_cache
        self._programs: LRU[Program] = LRU(_PROGRAM_CACHE_SIZE)
        self._engine_caches: Any = None
        self._lock = threading.Lock()

    def default(self, name: str) -> Any:
        """This Environment's default for a run keyword (the table's when it holds none)."""
        return option_value(name, {}, self.defaults)

    @property
    def model(self) -> Any:
        return self.default("model")

    @property
    def limits(self) -> Any:
        return self.default("limits")

    def __getattr__(self, name: str) -> Any:
        """`env.tool_timeout`, `env.retries`, …: the defaults read as attributes, as before."""
        if name in _RUN_OPTIONS:
            return self.default(name)
        raise AttributeError(f"'Environment' object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<struckdown.Environment at {id(self):#x}>"

    # -- registries ------------------------------------------------------------
    def register_type(
        self,
        name: str,
        model_or_factory: type[Any] | TypeFactory,
        *,
        description: str | None = None,
        options: Iterable[str] | None = None,
    ) -> None:
        """A custom type for `[[name:key]]`: a pydantic model (or any class pydantic
        validates) or a factory `(options, quantifier, required) -> item type`."""
        self.types.register(name, model_or_factory, description=description, options=options)
        self._programs.clear()

    def load_type_file(self, path: PathLike) -> list[str]:
        """Register every type of a YAML type file (all or nothing); returns their names."""
        names = self.types.load_yaml(path)
        self._programs.clear()
        return names

    def register_action(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        side_effects: bool = False,
        role: Literal["user", "assistant", "none"] | None = "user",
    ) -> None:
        """Make `[[@name:key|args]]` call `fn(*args, **kwargs)` (sync or async).

        A function with a `context` parameter also receives the variables so far;
        arguments are converted to the parameters' annotated types. Mark anything that
        changes the world `side_effects=True`: pending guards are joined before it runs.
        The result joins the conversation as a user turn, as in 0.18 (`role="assistant"`:
        an assistant turn; `role="none"` or None: not at all); a template's `role=`
        option on the action chooses again for that one use.
        """
        self.actions.register(name, fn, side_effects=side_effects, role=role)
        self._programs.clear()

    # -- parsing ---------------------------------------------------------------
    def parse(
        self,
        template: str,
        *,
        template_path: PathLike | None = None,
        include_paths: Sequence[PathLike] | None = None,
    ) -> Program:
        """Parse, check and plan a template without running it (cached by text).

        Raises TemplateSyntaxError, with line and column, for anything wrong with it.
        """
        path = str(template_path) if template_path is not None else None
        roots = tuple(str(p) for p in (self.default("include_paths") if include_paths is None else include_paths))
        # a relative path (or none) resolves against the working directory; an absolute one
        # names its folder already (a changed include is caught by its mtime on a hit)
        base = "" if path is not None and os.path.isabs(path) else os.getcwd()
        key = (template, path, roots, base)
        program = self._programs.get(key)
        if program is not None and not _includes_changed(program):
            return program
        program = self._build(template, path, roots)
        self._programs.put(key, program, replace=True)  # replaces one whose includes changed
        return program

    def _build(self, source: str, path: str | None, roots: tuple[str, ...]) -> Program:
        from .check import check_template
        from .plan import plan_program
        if self.template_cache is not None:  # parse_template, or from the store
            template = self.template_cache.parse(source, template_path=path, include_paths=roots)
        else:
            from .syntax.parser import parse_template

            template = parse_template(source, template_path=path, include_paths=roots)
        check_template(template, self)
        return plan_program(template, self)

    def resolve_model(self, model: ModelLike, *, option: str = "model") -> Any:
        """The pydantic-ai Model this environment runs for `model` (None: its default,
        else the environment variables and config). Built once per model string, after
        this Environment's `policy` allowed the name (`option`: the row it came from)."""
        from .authority import resolve_model

        return resolve_model(self.model if model is None else model, self.models, self.policy, option=option)

    def clear_caches(self) -> None:
        """Forget parsed Programs, the sandbox's compiled Jinja and the models built from
        strings (after changing provider keys in a long-lived process). Built output types
        stay: they belong to the type registry and change only when types do."""
        self._programs.clear()
        self.renderer.clear()
        self.models.clear()

    def program(self, template: str | Program, options: RunOptions) -> Program:
        """The Program to run: `template` parsed here, or a Program this Environment made."""
        if isinstance(template, Program):
            if template.environment is not self:
                raise ValueError(
                    "this Program was parsed by another Environment; run it with that one "
                    "(Program.environment), or parse the template with this one"
                )
            return template
        return self.parse(
            template, template_path=options.get("template_path"), include_paths=options.get("include_paths")
        )

    # -- running ---------------------------------------------------------------
    def _checked(self, function: str, options: Any) -> Any:
        """The call's keywords with 0.x's names mapped; an unknown one is a TypeError now."""
        from .compat.calls import call_options

        out = call_options(function, options, self, _RUN_OPTIONS)
        return checked_options(out)

    def _checked_batch(
        self, function: str, concurrency: int, on_result: Any, options: Any, executor: Any = None
    ) -> Any:
        from .compat.calls import batch_options

        # an executor (Dask) also takes its workers' factories (model_factory=, deps_factory=)
        valid = _RUN_OPTIONS if executor is None else _RUN_OPTIONS | _EXECUTOR_OPTIONS
        concurrency, on_result, out = batch_options(function, concurrency, on_result, options, self, valid)
        own = {k: v for k, v in out.items() if k in _RUN_OPTIONS}
        return concurrency, on_result, {**out, **checked_options(own)}

    def engine_caches(self) -> Any:
        """The agents, tool boxes and output wrappers runs of this Environment reuse
        (made on the first run: parsing alone does not import pydantic-ai)."""
        if self._engine_caches is None:
            with self._lock:
                if self._engine_caches is None:
                    from .run.caches import EngineCaches

                    self._engine_caches = EngineCaches()
        return self._engine_caches

    def run_settings(self, options: RunOptions, *, stream: bool, **path: Any) -> Any:
        """The call's options over this Environment's defaults, as the engine takes them
        (`path`: what the entry path adds: requests, mcp, provider_batch, batch, resume)."""
        from .run.settings import build_settings

        return build_settings(self, options, stream=stream, **path)

    async def complete_async(
        self, template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """Run a template to the end and return its Result."""
        from .run import run_to_result

        options = self._checked("complete_async", options)
        one_context("complete_async", context)
        program = self.program(template, options)
        async with self._mcp_sessions(program, options) as sessions:
            return await run_to_result(program, context, self.run_settings(options, stream=False, mcp=sessions))

    async def _complete_row(
        self,
        program: Program,
        context: Mapping[str, Any],
        options: RunOptions,
        requests: Any,
        batching: Any = None,
        mcp: Any = None,
        batch: Any = None,
        settings: Any = None,
    ) -> Result:
        """One batch row: its requests share the batch's limiter (and provider batching),
        its MCP servers the batch's sessions, its spending the batch's account. `settings`:
        the batch's RunSettings, built once for all its rows (they are the same for each)."""
        from .run import run_to_result

        if settings is None:
            settings = self.run_settings(
                options, stream=False, requests=requests, mcp=mcp, provider_batch=batching, batch=batch
            )
        return await run_to_result(program, context, settings)

    def _mcp_sessions(self, program: Program, options: RunOptions) -> AbstractAsyncContextManager[Any]:
        """The MCP sessions of one run or batch (None inside without servers): opened as
        slots first need them, closed when the block ends (SPEC §16)."""
        from .tools.mcp import run_sessions

        return run_sessions(option_value("mcp", options, self.defaults), program)

    def complete_incremental_async(
        self,
        template: str | Program,
        context: Mapping[str, Any] | None = None,
        *,
        stream: bool = True,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[Any, None]:
        """Run a template and yield its events as they happen (SPEC §6).

        Closing the generator (`await gen.aclose()`) or cancelling the consuming task
        cancels every in-flight model call, tool and guard. A bad keyword is a
        TypeError here, at the call, not at the first event.
        """
        one_context("complete_incremental_async", context)
        return self._events(template, context, stream, self._checked("complete_incremental_async", options))

    async def _events(
        self, template: str | Program, context: Mapping[str, Any] | None, stream: bool, options: RunOptions
    ) -> AsyncGenerator[Any, None]:
        from .run import events

        program = self.program(template, options)
        async with self._mcp_sessions(program, options) as sessions:
            stream_of_events = events(program, context, self.run_settings(options, stream=stream, mcp=sessions))
            async for event in _ending_at_error(stream_of_events):
                yield event

    def complete(
        self, template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """Sync `complete_async`; works inside a running event loop too."""
        from .sync import run_sync

        options = self._checked("complete", options)
        one_context("complete", context)
        return run_sync(lambda: self.complete_async(template, context, **options))

    def complete_incremental(
        self,
        template: str | Program,
        context: Mapping[str, Any] | None = None,
        *,
        stream: bool = True,
        **options: Unpack[RunOptions],
    ) -> Iterator[Any]:
        """Sync, truly incremental events: each event reaches the caller when it happens.
        Leaving the loop early (break, close, garbage collection) cancels the run."""
        from .sync import iterate_sync

        options = self._checked("complete_incremental", options)
        one_context("complete_incremental", context)
        return iterate_sync(lambda: self.complete_incremental_async(template, context, stream=stream, **options))

    # -- resuming a paused run (SPEC §12) ----------------------------------------------
    def _resumed(
        self, state: Mapping[str, Any] | str, decisions: Mapping[str, Any], template: str | None,
        options: RunOptions,
    ) -> tuple[Program, dict[str, Any], RunOptions, Any]:
        """The paused run's Program, its context, its options (those its state recorded, under
        the call's) and its resume point; a state or decisions that do not fit are a
        ValueError before any model call."""
        import json

        from .approval.signing import verify_state
        from .approval.state import STATE_FORMAT, read_state
        from .tools.mcp import resolve_servers

        if isinstance(state, str):
            try:
                state = json.loads(state)
            except json.JSONDecodeError as exc:
                raise ValueError(f"the paused state is not JSON: {exc}") from None
        if isinstance(state, Mapping) and state.get("format") == STATE_FORMAT:
            verify_state(state)  # signed, unedited: before any option it records is used (issue 39 N3)
        recorded = state.get("options") if isinstance(state, Mapping) else None
        if isinstance(recorded, Mapping):
            kept = {k: OPTIONS[k].restored(v) for k, v in recorded.items() if k in _RUN_OPTIONS and k not in options}
            options = {**checked_options(kept), **options}  # type: ignore[typeddict-item]
        tools = self.engine_caches().toolbox(tuple(option_value("tools", options, self.defaults)))
        servers = [server.name for server in resolve_servers(option_value("mcp", options, self.defaults))]
        point = read_state(state, decisions, template=template, tools=tools.names, servers=servers)
        path = options.get("template_path", point.template_path)  # where its includes resolve
        program = self.parse(point.template, template_path=path, include_paths=options.get("include_paths"))
        return program, point.context, options, point

    async def resume_async(
        self,
        state: Mapping[str, Any] | str,
        decisions: Mapping[str, Any],
        *,
        template: str | None = None,
        context: Mapping[str, Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> Result:
        """Continue a paused run (`Paused.state`) with `{request_id: True | False | "reason"}`.

        Slots that finished before the pause are not run again, the paused slot does not
        resend the request that asked for the calls, and the calls of that response that
        needed no approval are not run again. The run may pause again (`Paused`).
        `context=` replaces the stored one (JSON) for values JSON cannot hold. The options
        the state recorded (`run_options.OPTIONS[...].recorded`) apply unless given again.
        """
        from .run import run_to_result

        options = self._checked("resume_async", options)
        program, stored, options, point = self._resumed(state, decisions, template, options)
        async with self._mcp_sessions(program, options) as sessions:
            settings = self.run_settings(options, stream=False, mcp=sessions, resume=point)
            return await run_to_result(program, stored if context is None else context, settings)

    def resume(
        self,
        state: Mapping[str, Any] | str,
        decisions: Mapping[str, Any],
        *,
        template: str | None = None,
        context: Mapping[str, Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> Result:
        """Sync `resume_async`."""
        from .sync import run_sync

        options = self._checked("resume", options)
        return run_sync(lambda: self.resume_async(state, decisions, template=template, context=context, **options))

    def resume_incremental_async(
        self,
        state: Mapping[str, Any] | str,
        decisions: Mapping[str, Any],
        *,
        template: str | None = None,
        context: Mapping[str, Any] | None = None,
        stream: bool = True,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[Any, None]:
        """`resume_async` as events (a pause again ends with `ProcessingComplete(paused=True)`).
        A bad keyword is a TypeError here, at the call."""
        options = self._checked("resume_incremental_async", options)
        return self._resumed_events(state, decisions, template, context, stream, options)

    async def _resumed_events(
        self, state: Mapping[str, Any] | str, decisions: Mapping[str, Any], template: str | None,
        context: Mapping[str, Any] | None, stream: bool, options: RunOptions,
    ) -> AsyncGenerator[Any, None]:
        from .run import events

        program, stored, options, point = self._resumed(state, decisions, template, options)
        async with self._mcp_sessions(program, options) as sessions:
            settings = self.run_settings(options, stream=stream, mcp=sessions, resume=point)
            stream_of_events = events(program, stored if context is None else context, settings)
            async for event in _ending_at_error(stream_of_events):
                yield event

    async def complete_batch_async(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_result: Callable[[int, Result | BaseException], Any] | None = None,
        executor: BatchExecutor | None = None,
        provider_batch: bool | BatchModelRequests | ProviderBatch | None = None,
        batch_limits: UsageLimits | None = None,
        **options: Unpack[RunOptions],
    ) -> list[Result | BaseException]:
        """Run one template over many contexts; results in input order.

        `batch_limits=` (a `UsageLimits`) and `max_cost=` (USD) are the whole batch's
        budget (SPEC §13): once it is spent no new row starts, rows in flight finish,
        and the rows not started come back as `BudgetExceeded`. `run_limits=` is each row's.

        A failing row is returned as its exception; the other rows go on. The
        template is parsed once. Concurrency belongs to this batch alone.
        `executor=None` runs the rows here on asyncio; another executor (e.g.
        `struckdown.distributed.DaskExecutor`) receives the template text and the
        row contexts and must honour the same contract. `provider_batch=True` (or a
        `BatchModelRequests`, or a `struckdown.ProviderBatch`) sends the rows' model
        requests through the provider's batch API (docs/batch.md). The returned list
        holds every row; `complete_batch_iter_async` is the form that holds none.
        """
        from .batch import BatchCall, collected

        concurrency, on_result, options = self._checked_batch(
            "complete_batch_async", concurrency, on_result, options, executor
        )
        program = self.program(template, options)
        job = BatchCall.of(self, program, contexts, concurrency, options, executor, provider_batch, batch_limits)
        return await collected(job, on_result)

    async def complete_batch_iter_async(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_result: Callable[[int, Result | BaseException], Any] | None = None,
        executor: BatchExecutor | None = None,
        provider_batch: bool | BatchModelRequests | ProviderBatch | None = None,
        batch_limits: UsageLimits | None = None,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[tuple[int, Result | BaseException], None]:
        """Run one template over many contexts and yield `(index, Result or exception)`
        as each row finishes (finishing order), keeping none of them: the
        constant-memory batch. `contexts` is read lazily, one row as a worker is free
        (an async iterable too, without an executor). Closing the generator cancels
        the rows in flight; a slow consumer holds the batch back. The other keywords
        are `complete_batch_async`'s (`on_result` is called with each pair before it is
        yielded)."""
        from .batch import BatchCall, callback_emitter, outcomes

        concurrency, on_result, options = self._checked_batch(
            "complete_batch_iter_async", concurrency, on_result, options, executor
        )
        program = self.program(template, options)
        job = BatchCall.of(self, program, contexts, concurrency, options, executor, provider_batch, batch_limits)
        stream = outcomes(job.run, concurrency)
        told = callback_emitter(on_result, None) if on_result is not None else None
        try:
            async for pair in stream:
                if told is not None:
                    await told(*pair)
                yield pair
        finally:
            await stream.aclose()

    def complete_batch(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_result: Callable[[int, Result | BaseException], Any] | None = None,
        executor: BatchExecutor | None = None,
        provider_batch: bool | BatchModelRequests | ProviderBatch | None = None,
        batch_limits: UsageLimits | None = None,
        **options: Unpack[RunOptions],
    ) -> list[Result | BaseException]:
        """Sync `complete_batch_async`."""
        from .sync import run_sync

        concurrency, on_result, options = self._checked_batch("complete_batch", concurrency, on_result, options, executor)
        return run_sync(
            lambda: self.complete_batch_async(
                template, contexts, concurrency=concurrency, on_result=on_result, executor=executor,
                provider_batch=provider_batch, batch_limits=batch_limits, **options,
            )
        )


def _includes_changed(program: Program) -> bool:
    """Includes are read from disk: a changed include must not hit a stale Program."""
    for name, mtime in program.template.included_files:
        try:
            if os.stat(name).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


_default: Environment | None = None
_default_lock = threading.Lock()


def default_environment() -> Environment:
    """The Environment behind `sd.complete`, `sd.parse`, `sd.register_type` and the CLI."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Environment()
    return _default


async def _ending_at_error(stream_of_events: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    """The events of a run; a failed run's last is its `ProcessingError`, after which the
    generator ends without raising (as 0.x's did): the error is `event.error`. An error
    before that event (a bad template, say) is raised as it is."""
    reported = False
    try:
        async for event in stream_of_events:
            reported = event.type == "processing_error"
            yield event
    except Exception:
        if not reported:
            raise
    finally:
        await stream_of_events.aclose()


def one_context(function: str, context: Any) -> None:
    """A list of contexts is a TypeError naming complete_batch() (0.x's habit, SPEC §11)."""
    if context is not None and not isinstance(context, Mapping):
        from .compat.calls import one_context as check

        check(function, context)
