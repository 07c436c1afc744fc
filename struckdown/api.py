"""The module-level entry points (SPEC §5): each is a method of the default Environment; and
struckdown 0.x's action registry on it (`Actions`, `ACTION_LOOKUP`, SPEC §11)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Unpack

from .environment import default_environment
from .notices import warn
from .plan import Program
from .results import Result
from .run_options import BatchExecutor, PathLike, RunOptions
from .types import TypeFactory

if TYPE_CHECKING:
    from pydantic_ai.capabilities import BatchModelRequests
    from pydantic_ai.usage import UsageLimits

    from .batch.provider import ProviderBatch

__all__ = [
    "ACTION_LOOKUP",
    "Actions",
    "complete",
    "complete_async",
    "complete_batch",
    "complete_batch_async",
    "complete_batch_iter_async",
    "complete_incremental",
    "complete_incremental_async",
    "load_type_file",
    "parse",
    "register_action",
    "register_type",
    "resume",
    "resume_async",
    "resume_incremental_async",
]


def complete(template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]) -> Result:
    """Run a template to the end and return its Result (sync; works inside a running loop)."""
    return default_environment().complete(template, context, **options)


async def complete_async(
    template: str | Program, context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions]
) -> Result:
    """Run a template to the end and return its Result."""
    return await default_environment().complete_async(template, context, **options)


def complete_incremental_async(
    template: str | Program, context: Mapping[str, Any] | None = None, *, stream: bool = True,
    **options: Unpack[RunOptions],
) -> AsyncGenerator[Any, None]:
    """Run a template and yield its events as they happen (SPEC §6)."""
    return default_environment().complete_incremental_async(template, context, stream=stream, **options)


def complete_incremental(
    template: str | Program, context: Mapping[str, Any] | None = None, *, stream: bool = True,
    **options: Unpack[RunOptions],
) -> Iterator[Any]:
    """Sync, truly incremental events."""
    return default_environment().complete_incremental(template, context, stream=stream, **options)


async def complete_batch_async(
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
    """Run one template over many contexts; results in input order (`batch_limits=` and
    `max_cost=` are the whole batch's budget)."""
    return await default_environment().complete_batch_async(
        template, contexts, concurrency=concurrency, on_result=on_result, executor=executor,
        provider_batch=provider_batch, batch_limits=batch_limits, **options,
    )


def complete_batch_iter_async(
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
    """Run one template over many contexts; yield `(index, outcome)` as rows finish, keeping none."""
    return default_environment().complete_batch_iter_async(
        template, contexts, concurrency=concurrency, on_result=on_result, executor=executor,
        provider_batch=provider_batch, batch_limits=batch_limits, **options,
    )  # fmt: skip


def complete_batch(
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
    return default_environment().complete_batch(
        template, contexts, concurrency=concurrency, on_result=on_result, executor=executor,
        provider_batch=provider_batch, batch_limits=batch_limits, **options,
    )


def parse(template: str, *, template_path: PathLike | None = None, include_paths: Iterable[PathLike] | None = None) -> Program:
    """Parse, check and plan a template on the default Environment (cached by text)."""
    roots = None if include_paths is None else tuple(include_paths)
    return default_environment().parse(template, template_path=template_path, include_paths=roots)


def register_type(
    name: str, model_or_factory: type[Any] | TypeFactory, *, description: str | None = None,
    options: Iterable[str] | None = None,
) -> None:
    """Register a custom type on the default Environment."""
    default_environment().register_type(name, model_or_factory, description=description, options=options)


def load_type_file(path: PathLike) -> list[str]:
    """Load a YAML type file into the default Environment; returns the new type names."""
    return default_environment().load_type_file(path)


def register_action(
    name: str, func: Callable[..., Any], *, side_effects: bool = False, role: Any = "user"
) -> None:
    """Register an action on the default Environment (see Environment.register_action)."""
    default_environment().register_action(name, func, side_effects=side_effects, role=role)




def resume(
    state: Mapping[str, Any] | str, decisions: Mapping[str, Any], *, template: str | None = None,
    context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions],
) -> Result:
    """Continue a paused run (`Paused.state`) with `{request_id: True | False | "reason"}` (SPEC §12)."""
    return default_environment().resume(state, decisions, template=template, context=context, **options)


async def resume_async(
    state: Mapping[str, Any] | str, decisions: Mapping[str, Any], *, template: str | None = None,
    context: Mapping[str, Any] | None = None, **options: Unpack[RunOptions],
) -> Result:
    """Continue a paused run (async)."""
    return await default_environment().resume_async(state, decisions, template=template, context=context, **options)


def resume_incremental_async(
    state: Mapping[str, Any] | str, decisions: Mapping[str, Any], *, template: str | None = None,
    context: Mapping[str, Any] | None = None, stream: bool = True, **options: Unpack[RunOptions],
) -> AsyncGenerator[Any, None]:
    """Continue a paused run, yielding its events."""
    return default_environment().resume_incremental_async(
        state, decisions, template=template, context=context, stream=stream, **options
    )


# -- 0.x's action registry (SPEC §11): on the default Environment, as `register_action` --------------

OnError = Literal["propagate", "return_empty", "return_default"]


class Actions:
    """0.x's action registry, on the default Environment (`sd.register_action`)."""

    @staticmethod
    def register(
        name: str | Callable[..., Any] | None = None,
        *,
        on_error: OnError = "propagate",
        default: Any = "",
        role: Literal["user", "assistant", "none"] | None = "user",
        side_effects: bool = False,
        default_save: bool = True,
        return_type: Any = None,
        allow_remote_use: bool = True,
    ) -> Any:
        """`@Actions.register("name", on_error=…, default=…)` on a function `(context, …)`.

        `on_error="return_empty"` turns a failure into `""` and `"return_default"` into
        `default`, each with a warning; `"propagate"` fails the run. `default_save`,
        `return_type` and `allow_remote_use` are accepted and change nothing (0.x stored
        them unread, or they belonged to its playground)."""
        if on_error not in ("propagate", "return_empty", "return_default"):
            raise ValueError(f"on_error is 'propagate', 'return_empty' or 'return_default', not {on_error!r}")

        def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
            action = name if isinstance(name, str) else func.__name__
            default_environment().register_action(
                action, _guarded(action, func, on_error, default), side_effects=side_effects, role=role
            )
            return func

        if callable(name):  # `@Actions.register` without arguments
            return decorate(name)
        return decorate

    @staticmethod
    def is_registered(name: str) -> bool:
        return name in default_environment().actions

    @staticmethod
    def list_registered() -> list[str]:
        return list(default_environment().actions.names())


def _guarded(name: str, func: Callable[..., Any], on_error: OnError, default: Any) -> Callable[..., Any]:
    if on_error == "propagate":
        return func

    def fallback(exc: Exception) -> Any:
        value = "" if on_error == "return_empty" else default
        warn(f"action @{name} failed ({type(exc).__name__}: {exc}); using {value!r}")
        return value

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await func(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - on_error says what a failure gives
                return fallback(exc)

        return run_async

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - on_error says what a failure gives
            return fallback(exc)

    return run


class _ActionLookup(Mapping[str, Callable[..., Any]]):
    """0.x's `ACTION_LOOKUP`: action name → function, live over the default Environment."""

    def __getitem__(self, name: str) -> Callable[..., Any]:
        actions = default_environment().actions
        if name not in actions:
            raise KeyError(name)
        func: Callable[..., Any] = inspect.unwrap(actions.get(name).func)  # the function as registered
        return func

    def __iter__(self) -> Iterator[str]:
        return iter(default_environment().actions.names())

    def __len__(self) -> int:
        return len(default_environment().actions.names())


ACTION_LOOKUP: Mapping[str, Callable[..., Any]] = _ActionLookup()
