"""The module-level entry points (SPEC §5): each is a method of the default Environment."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from .environment import default_environment
from .plan import Program
from .results import Result
from .run_options import BatchExecutor, PathLike, RunOptions
from .types import TypeFactory

if TYPE_CHECKING:
    from pydantic_ai.capabilities import BatchModelRequests
    from pydantic_ai.usage import UsageLimits

    from .batch.provider import ProviderBatch

__all__ = [
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
