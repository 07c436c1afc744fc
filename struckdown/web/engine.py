"""The playground's one door into struckdown: every call the web app makes into the
library goes through a function here (never into `cli/`: what the front ends share is
the library's).

These functions run inside a worker process (see `worker.py`), never in the server
itself. When the library's names move, this is the file to re-point.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: The built-in actions a shared server refuses whatever the registry says: they reach the
#: network or read files of the server's working directory. Every other action whose
#: arguments are marked (SPEC §30: `authority=` at registration) or that has side effects
#: is refused as well.
NETWORK_ACTIONS = frozenset({"fetch", "search", "history", "evidence"})


class Refused(Exception):
    """The request asks for something this server does not do (an action, a model)."""


def resolve_model(name: str | None) -> Any:
    """The `model=` a run gets for the name the page picked (None: the environment's
    default). The one place the playground turns a model name into a model; the CLI's
    rule applies (a model string, an alias or `module:factory`, passed on as it is)."""
    return name


def model_refusals(program: Any, policy: Any) -> list[dict[str, Any]]:
    """What the server's policy (`HostPolicy`) says of every option of the template whose
    row is marked as reaching a model, a file, code or the network (SPEC §30: `model=`,
    `fallback=`, `escalate=` and every row marked later), as diagnostics at the option:
    checked before any model is resolved or called."""
    from ..authority import program_refusals

    return [
        {"line": line, "column": column, "severity": "error", "message": message, "hint": None}
        for _key, _option, message, line, column in program_refusals(program, policy)
    ]


def refuse_models(program: Any, policy: Any) -> None:
    found = model_refusals(program, policy)
    if found:
        raise Refused(found[0]["message"])


def use_policy(program: Any, policy: Any) -> None:
    """The worker's Environment resolves every model, path and import through `policy`
    from now on (a second check at resolution: a value no static check saw)."""
    program.environment.policy = policy


def load_tools(path: str | None) -> list[Any]:
    from ..tools.files import load_tools as load

    return load(Path(path)) if path else []


def tool_names(tools: Sequence[Any]) -> list[dict[str, Any]]:
    from ..tools.files import describe_tool

    out = []
    for tool in tools:
        name, summary, readonly = describe_tool(tool)
        out.append({"name": name, "summary": summary, "readonly": readonly})
    return out


def parse_context(text: str | None, kind: str = "json") -> dict[str, Any]:
    """The context editor's text (JSON, or YAML when `kind` is yaml) as a mapping."""
    if text is None or not text.strip():
        return {}
    if kind == "yaml":
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"the context must be a mapping of names to values, not a {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def diagnostics(text: str, path: Path, context_names: set[str] | None, *, tools_given: bool) -> list[dict[str, Any]]:
    """What `sd check` says about the text, as dicts with line and column."""
    from ..lint import check_source

    found = check_source(text, path, context_names, tools_given=tools_given)
    return [
        {"line": d.line, "column": d.column, "severity": d.severity, "message": d.message, "hint": d.hint}
        for d in found
        if d.severity != "note"  # the expected-variables list: the context editor beside it shows them
    ]


def syntax_error(exc: BaseException) -> dict[str, Any] | None:
    """A TemplateSyntaxError as a diagnostic (None for any other exception)."""
    from .. import TemplateSyntaxError

    if not isinstance(exc, TemplateSyntaxError):
        return None
    return {"line": exc.line, "column": exc.column, "severity": "error", "message": exc.message, "hint": exc.hint}


def compile_text(text: str, path: Path) -> Any:
    from .. import parse

    return parse(text, template_path=path)


def actions_used(program: Any) -> list[tuple[str, int, int]]:
    """Every `[[@action]]` of a program: (name, line, column)."""
    from ..syntax.nodes import Action, walk

    return [
        (node.name, node.pos.line, node.pos.column)
        for segment in program.segments
        for node in walk(segment.nodes)
        if isinstance(node, Action)
    ]


def _action_registry(program: Any) -> Any:
    """The actions of the Environment that parsed the program."""
    return program.environment.actions


def network_actions(program: Any) -> list[dict[str, Any]]:
    """The actions a shared server does not run (network or side effects), as diagnostics."""
    registry = _action_registry(program)
    found = []
    for name, line, column in actions_used(program):
        spec = registry.get(name) if name in registry else None
        side_effects = spec is not None and (spec.side_effects or bool(spec.reaches()))
        if name in NETWORK_ACTIONS or side_effects:
            message = f"@{name} is turned off on this server (no network or side-effecting actions)"
            found.append({"line": line, "column": column, "severity": "error", "message": message, "hint": None})
    return found


def refuse_network_actions(program: Any) -> None:
    found = network_actions(program)
    if found:
        raise Refused(found[0]["message"])


def explain(program: Any, tools: Sequence[Any], title: str) -> str:
    """The `sd explain` tree as plain text."""
    from ..explain.plan import plan_text

    return plan_text(program, tools, title, width=110)


#: Usage fields that tell whether a provider's prompt cache already held a prefix: on a shared
#: server, another API key's request may have put it there (issue 47), so they are not sent.
CACHE_COUNTS = ("cache_read_tokens", "cache_write_tokens", "cache_saved")


def without_cache_counts(data: Any, keep: str | None = None) -> Any:
    """`data` with the provider cache counts removed from every usage in it (SPEC §30);
    the top-level key `keep` as it is (a signed state, cleaned before it was signed)."""
    if isinstance(data, dict):
        return {k: v if k == keep else without_cache_counts(v) for k, v in data.items() if k not in CACHE_COUNTS}
    if isinstance(data, list):
        return [without_cache_counts(v) for v in data]
    return data


def event_dict(event: Any, shared: bool = False) -> dict[str, Any]:
    """An event as the page receives it. `token_delta` drops `accumulated` (the page
    adds the deltas up), so a long answer costs its length on the wire, not its square;
    the final event also carries usage, per-slot types and the halt. On a shared server
    (`shared`) no usage in it holds provider cache counts."""
    data = _event_dict(event, shared)
    if not shared:
        return data
    if isinstance(data.get("error"), str):  # the worker's folder is none of the page's business (issue 47)
        data["error"] = data["error"].replace(str(Path.cwd()) + os.sep, "")
    cleaned: dict[str, Any] = without_cache_counts(data, keep="state")
    return cleaned


def _event_dict(event: Any, shared: bool) -> dict[str, Any]:
    data: dict[str, Any] = event.to_dict()
    if data["type"] == "token_delta":
        data.pop("accumulated", None)
    elif data["type"] == "processing_error":
        data["error"] = describe_error(event.error)
        if _caused_by(event.error, MemoryError):
            data["error"] += " (the template asked for more memory than this server allows)"
    elif data["type"] == "processing_complete":
        result = event.result
        data["usage"] = result.usage.to_dict()
        data["slots"] = {key: slot.to_dict() for key, slot in result.results.items()}
        halted = result.halted
        data["halted"] = None if halted is None else {"slot": halted.slot, "reason": halted.reason}
        if result.paused is not None:  # SPEC §12: the page decides, then posts the state back
            data["requests"] = [request.to_dict() for request in result.paused.requests]
            state = result.paused.state
            data["state"] = page_state(without_cache_counts(state) if shared else state)
    return data


async def run_events(
    program: Any, context: Mapping[str, Any], *, model: Any, tools: Sequence[Any], cache: bool, shared: bool = False
) -> AsyncIterator[dict[str, Any]]:
    from .. import complete_incremental_async

    async for event in complete_incremental_async(
        program, context, model=model, tools=tools, cache=cache, on_halt="return", stream=True
    ):
        yield event_dict(event, shared)


async def resume_events(
    program: Any, state: Mapping[str, Any], decisions: Mapping[str, Any], *, model: Any, tools: Sequence[Any],
    cache: bool, shared: bool = False,
) -> AsyncIterator[dict[str, Any]]:
    """A paused run continued with the page's decisions (SPEC §12). The state came back
    from the page, signed by this server for this API key (`check_state`): the template
    is the one the page sends now (`template=`: an edit since the pause is an error) and
    paths are the worker's."""
    from .. import resume_incremental_async
    from ..approval.state import read_state

    template = program.template
    from ..environment import default_environment

    try:  # what the run checks first: a state it will refuse anyway is not used up
        read_state(state, decisions, tools=default_environment().engine_caches().toolbox(tuple(tools)).names)
        usable = state.get("template") == template.source
    except (ValueError, TypeError, KeyError):
        usable = False
    if usable:
        claim(state)  # SPEC §29: resumed once, before anything runs
    async for event in resume_incremental_async(
        state, decisions, template=template.source, template_path=template.filename,
        model=model, tools=tools, cache=cache, on_halt="return", stream=True,
    ):
        yield event_dict(event, shared)


def page_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A paused state as the page gets it: naming no file of the worker (the page sends the
    template text back on resume), signed again with the key of this job (its API key's)."""
    from ..approval.signing import sign_state

    return sign_state({**state, "template_path": None, "includes": {}})


def check_state(state: Any, policy: Any) -> None:
    """A state the page sent back is one this server signed for this API key (issue 39
    N3/N6), and the options it recorded reach no model the allow-list refuses and no MCP
    server: else the request is refused before anything runs."""
    from ..approval.signing import verify_state

    if not isinstance(state, Mapping):
        raise Refused("the paused state must be a JSON object")
    try:
        verify_state(state)
    except ValueError as exc:
        raise Refused(f"this paused run cannot be resumed here: {exc}") from None
    recorded = state.get("options")
    if not isinstance(recorded, Mapping):
        return
    if recorded.get("mcp"):
        raise Refused("this paused run used MCP servers, which this server does not start")
    from ..authority import run_option_refusals
    from ..run_options import OPTIONS

    # SPEC §30: every recorded run keyword whose row is marked (model, fallback, journal, …)
    refusals = run_option_refusals(recorded, policy, OPTIONS)
    if refusals:
        raise Refused(f"this paused run cannot be resumed here: {refusals[0]}")


def claim(state: Mapping[str, Any]) -> None:
    """SPEC §29: a paused state is resumed once; the page's second approval is refused."""
    from ..approval.signing import claim_resume

    try:
        claim_resume(state, "the playground")
    except ValueError as exc:
        raise Refused(str(exc)) from None


async def run_batch(
    program: Any,
    rows: list[dict[str, Any]],
    *,
    model: Any,
    tools: Sequence[Any],
    jobs: int,
    cache: bool,
    on_row: Callable[[int, dict[str, Any]], None],
    shared: bool = False,
) -> list[dict[str, Any]]:
    """Every row through the template, as `sd batch` runs it; `on_row(index, entry)` for
    each finished row. Returns the journal entries in input order."""
    from .. import complete_batch_async
    from ..batch.output import journal_entry

    entries: list[dict[str, Any]] = [{} for _ in rows]

    def finished(index: int, outcome: Any) -> None:
        entry = journal_entry(index, outcome, "", "")
        entries[index] = without_cache_counts(entry) if shared else entry
        on_row(index, entries[index])

    if rows:
        await complete_batch_async(
            program, rows, concurrency=jobs, on_result=finished, model=model, tools=tools, cache=cache, on_halt="return"
        )
    return entries


def read_rows(path: Path) -> list[dict[str, Any]]:
    from ..batch.tables import read_file

    return read_file(path)


def upload_error(exc: BaseException, saved: Path, uploaded: str) -> str:
    """Why an uploaded table cannot be read, naming the file the user uploaded: the
    server's copy of it lives in a temporary folder whose path is none of the page's business."""
    message = describe_error(exc)
    for where in (str(saved), str(saved.resolve()), str(saved.parent)):
        message = message.replace(where, uploaded)
    return message


def write_rows(path: Path, rows: list[dict[str, Any]], entries: list[dict[str, Any]], keys: Sequence[str]) -> None:
    """The batch output as `sd batch -o path` writes it (format from the suffix)."""
    from ..batch.output import output_columns, output_row
    from ..batch.tables import write_table

    out = [output_row(row, entry) for row, entry in zip(rows, entries)]
    write_table(path, out, output_columns(rows, entries, list(keys)))


def _caused_by(exc: BaseException | None, kind: type[BaseException]) -> bool:
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, kind):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def describe_error(exc: BaseException) -> str:
    from ..errors import describe_error

    return describe_error(exc)


def template_schemas(path: Path) -> dict[str, Any]:
    """`{input, output}` of an operator's template (`sd serve --api`), as `sd types` prints them."""
    from .. import service

    program = compile_text(path.read_text(encoding="utf-8"), path)
    return service.schemas(program, path.stem)


def rebase(schema: Any, old: str, new: str) -> Any:
    from .. import service

    return service.rebase(schema, old, new)


def type_name(name: str) -> str:
    from .. import service

    return service.type_name(name)
