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
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack

from .actions import ActionRegistry, builtin_actions
from .lru import LRU
from .model_store import ModelStore
from .plan import Program
from .render import Renderer
from .types import TypeFactory, TypeRegistry

if TYPE_CHECKING:
    from pydantic_ai import Tool
    from pydantic_ai.models import Model
    from pydantic_ai.usage import UsageLimits

    from .results import Result

    ModelLike = Model | str | None  # a Model, a model string or `module:factory`, None: environment/config
    ToolLike = Callable[..., Any] | Tool[Any]

PathLike = str | os.PathLike[str]
OnHalt = Literal["raise", "return"]

_PROGRAM_CACHE_SIZE = 256

#: Seconds one tool call may take unless the host says otherwise (None: no limit).
DEFAULT_TOOL_TIMEOUT = 60.0


class ResponseCache(Protocol):
    """What a response cache object must offer (`cache=` accepts one, or True/a path)."""

    async def aget(self, key: str) -> Any: ...

    async def aput(self, key: str, value: Any) -> None: ...


class RunOptions(TypedDict, total=False):
    """The keyword arguments every entry point takes (SPEC §5), declared once.
    A keyword given to a call overrides the Environment's default for that call."""

    model: ModelLike
    tools: Sequence[ToolLike]  # plain callables (sync or async) or pydantic_ai.Tool objects
    deps: Any  # handed to tools as RunContext.deps
    deps_type: type[Any] | None
    limits: UsageLimits | None  # the per-slot ceiling
    tool_timeout: float | None  # seconds one tool call may take (the ceiling `tool_timeout=` options lower)
    max_requests: int | None  # most model requests in flight at once, across the run (or the whole batch)
    on_halt: OnHalt
    settings: Mapping[str, Any] | None  # pydantic_ai ModelSettings for every request
    cache: ResponseCache | bool | str | None
    template_path: PathLike | None
    include_paths: Sequence[PathLike]
    stop_at: str | None


class BatchExecutor(Protocol):
    """Where the rows of a batch run. The default (None) is this process's event loop."""

    async def run_batch(
        self,
        template: str,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int,
        on_result: Callable[[int, Result | BaseException], Any] | None,
        template_path: PathLike | None,
        include_paths: Sequence[PathLike],
        **kwargs: Any,
    ) -> list[Result | BaseException]: ...


class Environment:
    """Registries, sandbox, caches and run defaults for the templates it parses and runs."""

    def __init__(
        self,
        *,
        model: ModelLike = None,
        tools: Sequence[ToolLike] = (),
        deps: Any = None,
        limits: UsageLimits | None = None,
        settings: Mapping[str, Any] | None = None,
        cache: ResponseCache | bool | str | None = None,
        include_paths: Sequence[PathLike] = (),
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
    ) -> None:
        self.model = model
        self.tools = tuple(tools)
        self.deps = deps
        self.limits = limits
        self.settings = settings
        self.cache = cache
        self.include_paths = tuple(include_paths)
        self.tool_timeout = tool_timeout
        self.types = TypeRegistry()
        self.actions: ActionRegistry = builtin_actions()
        self.renderer = Renderer()
        self.models = ModelStore()  # models built from strings, and their run defaults
        self.response_caches: dict[Any, Any] = {}  # on-disk response caches by directory
        self._programs: LRU[Program] = LRU(_PROGRAM_CACHE_SIZE)
        self._engine_caches: Any = None
        self._lock = threading.Lock()

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
        role: Literal["user", "assistant"] | None = None,
    ) -> None:
        """Make `[[@name:key|args]]` call `fn(*args, **kwargs)` (sync or async).

        A function with a `context` parameter also receives the variables so far.
        Mark anything that changes the world `side_effects=True`: pending guards are
        joined before it runs. With `role`, the result also joins the conversation
        as a user or assistant turn.
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
        roots = tuple(str(p) for p in (self.include_paths if include_paths is None else include_paths))
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
        from .syntax import parse_template

        template = parse_template(source, template_path=path, include_paths=roots)
        check_template(template, self)
        return plan_program(template, self)

    def resolve_model(self, model: ModelLike) -> Any:
        """The pydantic-ai Model this environment runs for `model` (None: its default,
        else the environment variables and config). Built once per model string."""
        from .models import resolve_model

        return resolve_model(self.model if model is None else model, self.models)

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
    def engine_caches(self) -> Any:
        """The agents, tool boxes and output wrappers runs of this Environment reuse
        (made on the first run: parsing alone does not import pydantic-ai)."""
        if self._engine_caches is None:
            with self._lock:
                if self._engine_caches is None:
                    from .run.caches import EngineCaches

                    self._engine_caches = EngineCaches()
        return self._engine_caches

    def run_settings(self, options: RunOptions, *, stream: bool, requests: Any = None) -> Any:
        """The call's options over this Environment's defaults, as the engine takes them."""
        from .run import RunSettings

        on_halt = options.get("on_halt", "raise")
        if on_halt not in ("raise", "return"):
            raise ValueError(f"on_halt must be 'raise' or 'return', not {on_halt!r}")
        return RunSettings(
            model=options.get("model", self.model),
            tools=tuple(options.get("tools", self.tools)),
            deps=options.get("deps", self.deps),
            limits=options.get("limits", self.limits),
            on_halt=on_halt,
            settings=options.get("settings", self.settings),
            cache=options.get("cache", self.cache),
            stop_at=options.get("stop_at"),
            stream=stream,
            tool_timeout=options.get("tool_timeout", self.tool_timeout),
            requests=requests if requests is not None else _request_limiter(options.get("max_requests")),
        )

    async def complete_async(
        self, template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """Run a template to the end and return its Result."""
        from .run import run_to_result

        program = self.program(template, options)
        return await run_to_result(program, context, self.run_settings(options, stream=False))

    async def _complete_row(
        self, program: Program, context: Mapping[str, Any], options: RunOptions, requests: Any
    ) -> Result:
        """One batch row: its requests share the batch's limiter."""
        from .run import run_to_result

        return await run_to_result(program, context, self.run_settings(options, stream=False, requests=requests))

    async def complete_incremental_async(
        self,
        template: str | Program,
        context: Mapping[str, Any] | None = None,
        *,
        stream: bool = True,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[Any, None]:
        """Run a template and yield its events as they happen (SPEC §6).

        Closing the generator (`await gen.aclose()`) or cancelling the consuming task
        cancels every in-flight model call, tool and guard.
        """
        from .run import events

        program = self.program(template, options)
        stream_of_events = events(program, context, self.run_settings(options, stream=stream))
        try:
            async for event in stream_of_events:
                yield event
        finally:
            await stream_of_events.aclose()

    def complete(
        self, template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]
    ) -> Result:
        """Sync `complete_async`; works inside a running event loop too."""
        from .sync import run_sync

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

        return iterate_sync(lambda: self.complete_incremental_async(template, context, stream=stream, **options))

    async def complete_batch_async(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_result: Callable[[int, Result | BaseException], Any] | None = None,
        executor: BatchExecutor | None = None,
        **options: Unpack[RunOptions],
    ) -> list[Result | BaseException]:
        """Run one template over many contexts; results in input order.

        A failing row is returned as its exception; the other rows go on. The
        template is parsed once. Concurrency belongs to this batch alone.
        `executor=None` runs the rows here on asyncio; another executor (e.g.
        `struckdown.distributed.DaskExecutor`) receives the template text and the
        row contexts and must honour the same contract. The returned list holds
        every row; `complete_batch_iter_async` is the form that holds none.
        """
        program = self.program(template, options)
        if executor is not None:
            return await self._executor_batch(program, contexts, concurrency, on_result, executor, options, collect=True)
        from .batching import callback_emitter

        results: list[Result | BaseException | None] = []

        def keep(index: int, outcome: Result | BaseException) -> None:
            results.extend([None] * (index + 1 - len(results)))
            results[index] = outcome

        await self._local_batch(program, contexts, concurrency, callback_emitter(on_result, keep), options)
        return results  # type: ignore[return-value]

    async def complete_batch_iter_async(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        executor: BatchExecutor | None = None,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[tuple[int, Result | BaseException], None]:
        """Run one template over many contexts and yield `(index, Result or exception)`
        as each row finishes (finishing order), keeping none of them: the
        constant-memory batch. `contexts` is read lazily, one row as a worker is free
        (an async iterable too, without an executor). Closing the generator cancels
        the rows in flight; a slow consumer holds the batch back."""
        from .batching import outcomes

        program = self.program(template, options)

        async def start(emit: Any) -> None:
            if executor is not None:
                await self._executor_batch(program, contexts, concurrency, emit, executor, options, collect=False)
            else:
                await self._local_batch(program, contexts, concurrency, emit, options)

        stream = outcomes(start, concurrency)
        try:
            async for pair in stream:
                yield pair
        finally:
            await stream.aclose()

    async def _executor_batch(
        self,
        program: Program,
        contexts: Any,
        concurrency: int,
        on_result: Any,
        executor: BatchExecutor,
        options: RunOptions,
        *,
        collect: bool,
    ) -> list[Result | BaseException]:
        """The rows on `executor`; with `collect=False` (when it accepts that keyword)
        it keeps no finished row."""
        from .batching import accepts_keyword

        if isinstance(contexts, AsyncIterable):
            raise TypeError("a batch on an executor takes an iterable of contexts, not an async iterable")
        kwargs: dict[str, Any] = {k: v for k, v in options.items() if k not in ("template_path", "include_paths")}
        if not collect and accepts_keyword(executor.run_batch, "collect"):
            kwargs["collect"] = False
        return await executor.run_batch(
            program.template.source,
            contexts,
            concurrency=concurrency,
            on_result=on_result,
            template_path=options.get("template_path"),
            include_paths=options.get("include_paths", self.include_paths),
            **kwargs,
        )

    async def _local_batch(
        self,
        program: Program,
        contexts: Iterable[Mapping[str, Any]] | AsyncIterable[Mapping[str, Any]],
        concurrency: int,
        emit: Callable[[int, Any], Awaitable[None]],
        options: RunOptions,
    ) -> None:
        """Rows on this event loop, each handed to `emit` as it finishes; a failing row
        is its exception and the others go on (see `batching`)."""
        from .batching import run_rows, shared_rows

        requests = _request_limiter(options.get("max_requests"))  # one cap for every row

        def run_row(context: Mapping[str, Any]) -> Awaitable[Result]:
            return self._complete_row(program, context, options, requests)

        await run_rows(shared_rows(contexts), run_row, concurrency, emit)

    def complete_batch(
        self,
        template: str | Program,
        contexts: Iterable[Mapping[str, Any]],
        *,
        concurrency: int = 8,
        on_result: Callable[[int, Result | BaseException], Any] | None = None,
        executor: BatchExecutor | None = None,
        **options: Unpack[RunOptions],
    ) -> list[Result | BaseException]:
        """Sync `complete_batch_async`."""
        from .sync import run_sync

        return run_sync(
            lambda: self.complete_batch_async(
                template, contexts, concurrency=concurrency, on_result=on_result, executor=executor, **options
            )
        )


def _request_limiter(max_requests: int | None) -> Any:
    """A cap on the model requests in flight at once (None: no cap)."""
    if max_requests is None:
        return None
    if isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1:
        raise ValueError(f"max_requests must be a whole number of at least 1, not {max_requests!r}")
    import anyio

    return anyio.CapacityLimiter(max_requests)


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
