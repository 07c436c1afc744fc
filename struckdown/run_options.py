"""The keywords a run takes, each declared once (SPEC §5, §22), and the protocols a host plugs in.

`OPTIONS` holds every fact of each keyword: its default, whether the Environment may hold
one, the CLI flags that set it, how it travels to a Dask worker, whether a paused run
records it, and its check. `RunOptions` is the same list as a TypedDict, which every entry
point unpacks (`**options: Unpack[RunOptions]`) so that a type checker knows each keyword;
import fails if the two differ. `RUN_OPTIONS` is the set of names that
`compat.call_options` checks calls against. `ResponseCache` and `BatchExecutor` are what
`cache=` and `executor=` accept besides the built-in ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

if TYPE_CHECKING:
    from pydantic_ai import Tool
    from pydantic_ai.models import Model
    from pydantic_ai.usage import UsageLimits

    from .approval.state import ApprovalRequest
    from .results import Result

    ModelLike = Model | str | None  # a Model, a model string or `module:factory`, None: environment/config
    ToolLike = Callable[..., Any] | Tool[Any]
    # SPEC §12: (request) -> True | False | "reason" (sync or async), True/False for every call, None: pause
    Approver = Callable[[ApprovalRequest], Any] | bool | None

PathLike = str | os.PathLike[str]
OnHalt = Literal["raise", "return"]

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
    max_seconds: float | None  # seconds one slot's answer may take (the ceiling `max_seconds=` options lower)
    max_tool_result: int | None  # characters of one tool result the model reads; longer ones are cut with a note
    max_requests: int | None  # most model requests in flight at once, across the run (or the whole batch)
    on_halt: OnHalt
    settings: Mapping[str, Any] | None  # pydantic_ai ModelSettings for every request
    cache: ResponseCache | bool | str | None
    prompt_cache: bool  # SPEC §24: ask the provider to cache the fixed prefix (docs/caching.md); default True
    template_path: PathLike | None
    include_paths: Sequence[PathLike]
    stop_at: str | None
    strict_undefined: bool  # a variable neither in the context nor answered before: an error, not a warning
    mcp: Any  # MCP servers as slot tools: URLs, commands, .py paths, an mcp.json, MCPToolset/MCP objects (SPEC §16)
    approve: Approver  # who decides tool calls that need approval; None: the run pauses (SPEC §12)
    run_limits: UsageLimits | None  # run-wide: every model request and tool call of the run (SPEC §13)
    max_cost: float | None  # USD, run-wide (for complete_batch: the whole batch's)
    prices: Mapping[str, Mapping[str, float]] | None  # USD per million tokens, by model name or provider:name
    tool_limits: Mapping[str, int] | None  # per-tool call ceilings per slot (`budget=` lowers them)
    instrument: Any  # True, an OpenTelemetry TracerProvider or pydantic-ai InstrumentationSettings (SPEC §19)
    image_max_side: int | None  # images with a longer side are shrunk with Pillow (default 2048; None: never)
    max_images: int | None  # images one request may hold, earlier turns included (default 50; None: no limit)
    # SPEC §14 (docs/resilience.md)
    retries: int | None  # retries of a transient provider failure per request (None: STRUCKDOWN_MAX_RETRIES or 3)
    retry_base_delay: float | None  # seconds; the n-th retry waits up to base × 2^(n-1) (full jitter)
    retry_max_delay: float | None  # seconds a retry waits at most (default 30)
    fallback: ModelLike | Sequence[ModelLike]  # models a slot runs on, in order, when it cannot finish on its own
    on_truncate: Literal["keep", "error"]  # an answer cut at its token limit: kept and flagged, or TruncatedError
    on_retry: Callable[[Any], Any] | None  # called with every SlotRetry and SlotFallback event (also in complete())
    journal: PathLike | None  # SPEC §25: the effect journal (a path): each tool effect exactly once
    rerun_from: str | None  # SPEC §25: with journal=, this slot and every slot after it run again (no reuse)
    loop_guard: bool  # SPEC §34: a free-text answer that loops is stopped and asked again once (default True)
    # SPEC §33 (docs/flow.md)
    private: Sequence[str]  # context names whose values are private: never sent to a remote model or external tool
    untrusted: Sequence[str]  # context names whose values are untrusted: never in the request of a write-tool slot
    local_models: Sequence[str]  # model names or base URLs the host counts as local (SPEC §33)
    remote_models: Sequence[str]  # model names or base URLs the host counts as remote (a proxy on localhost)


#: How an option travels to a Dask worker (`RunOption.shipped`, which distributed/shipping.py calls):
#: "data" JSON-able plain data; "model" a model string; "models" model strings; "tools" importable
#: names or .py files; "mcp" server specs; "cache" True/False/a directory; "limits" a UsageLimits;
#: "decision" True/False only; "caller" used by the caller's process (the job carries it); "path" a
#: file path, made absolute, that the workers open at the same place (a folder they share);
#: "no" cannot travel: the pair is refused before any row starts.
Shipping = Literal["data", "model", "models", "tools", "mcp", "cache", "limits", "decision", "caller", "path", "no"]


@dataclass(frozen=True)
class RunOption:
    """Every fact of one run keyword (SPEC §22): a new option is one row of `OPTIONS` (and one
    line of `RunOptions` for type checkers); every entry point, the Dask shipping, the paused
    state and the CLI read it from here."""

    name: str
    feature: str  # the SPEC §22 feature it belongs to (the pairwise matrix, tests/run/test_pairs.py)
    default: Any = None  # when neither the call nor the Environment gives it
    environment: bool = True  # the Environment may hold a default for it
    flags: tuple[str, ...] = ()  # the CLI flags that set it (cli/options.py RUN_FLAGS declares them)
    ships: Shipping = "data"
    recorded: bool = False  # a paused run's state records it; resume uses it unless given again
    check: Callable[[Any], Any] | None = None  # the value checked (and normalised) at the call, before any work
    #: a keyword of the batch calls only (`complete_batch*`, `sd batch`), not of a run: True;
    #: "executor": one only a batch executor takes (a Dask worker's factories)
    batch: bool | Literal["executor"] = False
    # SPEC §30: what its value reaches ("model", "file", "code", "network"): the host's policy
    # (`sd serve --models`, no files, no code) checks every marked row (struckdown/authority.py)
    authority: frozenset[str] = frozenset()

    def shipped(self, value: Any) -> Any:
        """`value` as a Dask worker gets it (by `ships`); a ValueError naming the importable
        form to pass instead when it cannot travel (distributed/shipping.py)."""
        return _shipped(self.name, value)

    def plain(self, value: Any) -> tuple[Any] | None:
        """`value`'s plain (JSON) form, as a paused state records it: `(plain,)`, or None when
        it has none (a Model object, a function) and so is not recorded."""
        return _plain(self.name, value)

    def restored(self, plain: Any) -> Any:
        """A recorded plain form back in the form the entry points take (the inverse of `plain`)."""
        return _restored(self.name, plain)


def _choice(name: str, *allowed: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in allowed:
            raise ValueError(f"{name} must be {' or '.join(repr(a) for a in allowed)}, not {value!r}")
        return value
    return check


def _whole(name: str, least: int, *, none: bool = True) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None and none:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be a whole number of at least {least}, not {value!r}")
        return value
    return check


def _seconds(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a number of seconds above 0 (or None), not {value!r}")
        return value
    return check


def _usage_limits(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not hasattr(value, "request_limit"):
            raise ValueError(f"{name}= must be a pydantic_ai.usage.UsageLimits, not {type(value).__name__}")
        return value
    return check


def _mapping(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"{name}= must be a mapping, not {type(value).__name__}")
        return value
    return check


def _flag(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, bool):
            raise ValueError(f"{name}= must be True or False, not {value!r}")
        return value
    return check


def _cost(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise ValueError(f"max_cost= must be a number of US dollars of at least 0, not {value!r}")
    return value


def _paths(value: Any) -> Any:
    if isinstance(value, (str, os.PathLike)):
        raise ValueError("include_paths= takes a list of directories, not one string")
    return tuple(value or ())


def _slot_name(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{name}= takes a slot's name, not {value!r}")
        return value
    return check


def _callable(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and not callable(value):
            raise ValueError(f"{name}= must be callable (or None), not {type(value).__name__}")
        return value
    return check


def _names(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None:
            return ()
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple, set, frozenset)) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{name}= takes context names (a list, or one string separated by commas), not {value!r}")
        names = tuple(i.strip() for i in items if i.strip())
        if not all(n.isidentifier() for n in names):
            raise ValueError(f"{name}= takes context names (a list, or one string separated by commas), not {value!r}")
        return names
    return check


def _places(name: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None:
            return ()
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple, set, frozenset)) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{name}= takes model names or base URLs (a list, or one string separated by "
                             f"commas), not {value!r}")
        return tuple(i.strip().rstrip("/") for i in items if i.strip())
    return check


def _journal(value: Any) -> Any:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"journal= takes a file path, not {type(value).__name__}")
    return value


_O = RunOption
_MODEL, _FILE, _NET = frozenset({"model"}), frozenset({"file"}), frozenset({"network"})
#: Every keyword, each declared once (SPEC §22): the run keywords (read by `Environment`
#: (defaults, checks), `run/settings.py` (the one RunSettings builder), `distributed/shipping.py`
#: (what a Dask worker gets), `approval/state.py` (what a paused run records) and
#: `cli/options.py` (flags)), then the batch calls' own (`batch=`).
DECLARED: Mapping[str, RunOption] = {o.name: o for o in (
    _O("model", "model", flags=("--model",), ships="model", recorded=True, authority=_MODEL),
    _O("tools", "function tools", default=(), flags=("--tools",), ships="tools", authority=frozenset({"code", "file"})),
    _O("deps", "function tools"),
    _O("deps_type", "function tools", ships="caller"),  # 0.x's; accepted, nothing reads it (docs/migration.md)
    _O("limits", "budgets", ships="limits", recorded=True, check=_usage_limits("limits")),
    _O("tool_timeout", "tool_timeout", default=60.0, flags=("--tool-timeout",), recorded=True,
       check=_seconds("tool_timeout")),
    _O("max_seconds", "max_seconds", flags=("--max-seconds",), recorded=True, check=_seconds("max_seconds")),
    _O("max_tool_result", "tool results", default=100_000, recorded=True, check=_whole("max_tool_result", 1)),
    _O("max_requests", "concurrency", environment=False, flags=("--max-requests",), ships="caller",
       check=_whole("max_requests", 1)),
    _O("on_halt", "guards", default="raise", check=_choice("on_halt", "raise", "return")),
    _O("settings", "model settings", flags=("--max-tokens", "--seed", "--thinking"), recorded=True,
       check=_mapping("settings")),
    _O("cache", "response cache", flags=("--no-cache",), ships="cache", recorded=True, authority=_FILE),
    _O("prompt_cache", "prompt caching", default=True, flags=("--no-prompt-cache",), recorded=True,
       check=_flag("prompt_cache")),
    _O("template_path", "templates", environment=False, ships="caller", authority=_FILE),
    _O("include_paths", "templates", default=(), flags=("--include-path",), ships="caller", recorded=True,
       check=_paths, authority=_FILE),
    _O("stop_at", "templates", environment=False, flags=("--stop-at",), recorded=True),
    _O("strict_undefined", "strict_undefined", default=False, flags=("--strict",), recorded=True,
       check=_flag("strict_undefined")),
    _O("mcp", "MCP tools", flags=("--mcp", "--mcp-config"), ships="mcp", recorded=True,
       authority=frozenset({"code", "file", "network"})),
    _O("approve", "approval", ships="decision"),  # --approve is each command's own (run: all|none; resume: ID)
    _O("run_limits", "budgets", environment=False, ships="limits", recorded=True, check=_usage_limits("run_limits")),
    _O("max_cost", "max_cost", environment=False, flags=("--max-cost",), ships="caller", recorded=True, check=_cost),
    _O("prices", "prices", flags=("--prices",), recorded=True, check=_mapping("prices")),
    _O("tool_limits", "budgets", recorded=True, check=_mapping("tool_limits")),
    _O("instrument", "instrument", default=False, flags=("--otel",), ships="decision", authority=_NET),
    _O("image_max_side", "images", default=2048, recorded=True, check=_whole("image_max_side", 1)),
    _O("max_images", "images", default=50, recorded=True, check=_whole("max_images", 0)),
    _O("retries", "retries", flags=("--retries",), recorded=True, check=_whole("retries", 0)),
    _O("retry_base_delay", "retries", recorded=True),
    _O("retry_max_delay", "retries", recorded=True),
    _O("fallback", "fallback", flags=("--fallback",), ships="models", recorded=True, authority=_MODEL),
    _O("on_truncate", "on_truncate", default="keep", flags=("--on-truncate",), recorded=True,
       check=_choice("on_truncate", "keep", "error")),
    _O("on_retry", "retries", environment=False, ships="no"),
    _O("journal", "journal", environment=False, flags=("--journal",), ships="path", recorded=True, check=_journal,
       authority=_FILE),
    _O("rerun_from", "rerun", environment=False, flags=("--rerun-from",), recorded=True, check=_slot_name("rerun_from")),
    _O("loop_guard", "loop guard", default=True, flags=("--no-loop-guard",), recorded=True, check=_flag("loop_guard")),
    _O("private", "flow", default=(), flags=("--private",), recorded=True, check=_names("private")),
    _O("untrusted", "flow", default=(), flags=("--untrusted",), recorded=True, check=_names("untrusted")),
    _O("local_models", "flow", default=(), flags=("--local-models",), recorded=True, check=_places("local_models")),
    _O("remote_models", "flow", default=(), flags=("--remote-models",), recorded=True, check=_places("remote_models")),
    # the batch calls' own keywords (complete_batch, complete_batch_async, complete_batch_iter_async, sd batch)
    _O("concurrency", "batch rows", default=8, environment=False, flags=("--jobs",), ships="caller", batch=True,
       check=_whole("concurrency", 1, none=False)),
    _O("on_result", "batch rows", environment=False, ships="caller", batch=True, check=_callable("on_result")),
    _O("executor", "executor", environment=False, flags=("--engine", "--workers", "--address"), ships="caller",
       batch=True),
    _O("provider_batch", "provider_batch", environment=False, flags=("--provider-batch", "--batch-wait", "--batch-size"),
       ships="caller", batch=True),
    _O("batch_limits", "batch budget", environment=False, ships="caller", batch=True,
       check=_usage_limits("batch_limits")),
    _O("model_factory", "executor", environment=False, ships="caller", batch="executor"),
    _O("deps_factory", "executor", environment=False, ships="caller", batch="executor"),
)}
#: The run keywords: what every entry point takes (`**options: Unpack[RunOptions]`).
OPTIONS: Mapping[str, RunOption] = {name: o for name, o in DECLARED.items() if not o.batch}
#: The batch calls' own keywords (each a keyword-only parameter of `complete_batch*`).
BATCH_OPTIONS: Mapping[str, RunOption] = {name: o for name, o in DECLARED.items() if o.batch is True}
#: What a batch executor's workers take besides (struckdown/distributed/shipping.py).
EXECUTOR_OPTIONS = frozenset(name for name, o in DECLARED.items() if o.batch == "executor")

#: The keywords every entry point takes (others are a TypeError at the call; see compat.py).
RUN_OPTIONS = frozenset(OPTIONS)
if RUN_OPTIONS != frozenset(RunOptions.__annotations__):  # the TypedDict is the same list, for type checkers
    raise RuntimeError(f"RunOptions and OPTIONS differ: {sorted(RUN_OPTIONS ^ set(RunOptions.__annotations__))}")


#: every run keyword's default when neither the call nor the Environment gives it
TABLE_DEFAULTS: Mapping[str, Any] = {name: option.default for name, option in OPTIONS.items()}


def option_value(name: str, call: Mapping[str, Any], defaults: Mapping[str, Any]) -> Any:
    """A keyword's value for a run: the call's, else the Environment's default, else the table's."""
    if name in call:
        return call[name]
    return defaults.get(name, OPTIONS[name].default)


def merged_options(call: Mapping[str, Any], defaults: Mapping[str, Any]) -> RunOptions:
    """Every run keyword's value for one run: the call's over the Environment's defaults over
    the table's, merged once (as pydantic-ai merges model settings: `base | overrides`)."""
    merged: dict[str, Any] = {**TABLE_DEFAULTS, **defaults, **call}
    return merged  # type: ignore[return-value]


def checked_options(options: Mapping[str, Any], *, environment: bool = False) -> dict[str, Any]:
    """Every value checked by its row (a bad one is a ValueError naming the keyword, before any work);
    `environment=True`: also refuse keywords that are per call only."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        option = OPTIONS[name]
        if environment and not option.environment:
            raise TypeError(f"{name}= is given per call (complete(…, {name}=…)), not as an Environment default")
        out[name] = option.check(value) if option.check is not None else value
    return out


# -- an option's plain form: what travels to a Dask worker, what a paused state records --------


def _plain(name: str, value: Any) -> tuple[Any] | None:
    """A run option's plain (JSON) form, as a paused state records it: `(plain,)`, or None
    when the value has none (a Model object, a function) and so is not recorded."""
    if value is None:
        return None
    kind = OPTIONS[name].ships
    if name == "journal":  # a path: a resumed run journals on into the same file (SPEC §25)
        return (os.fspath(value),)
    if name == "mcp":
        try:
            specs = _mcp_spec(value) if not _live(value) else None
        except Exception:  # noqa: BLE001 - toolset objects have no plain form: not recorded, never a failed run
            return None
        if specs is None or any(s.get("env") or s.get("headers") for s in specs):
            return None  # a server's env and headers may hold secrets: a state file does not keep them
        return (list(specs),)
    if kind == "limits":
        from dataclasses import asdict

        return ({k: v for k, v in asdict(value).items() if v is not None},)
    try:
        shipped = _shipped(name, value)
        json.dumps(shipped)
    except (TypeError, ValueError):
        return None
    return (list(shipped) if isinstance(shipped, tuple) else shipped,)


def _restored(name: str, plain: Any) -> Any:
    """A recorded option back in the form the entry points take (the inverse of `_plain`)."""
    kind = OPTIONS[name].ships
    if kind == "limits":
        from pydantic_ai.usage import UsageLimits

        return UsageLimits(**plain)
    if name == "mcp":
        from .tools.mcp import ServerSpec

        return tuple(ServerSpec.from_plain(item) for item in plain)
    if kind == "models" and isinstance(plain, list):
        return tuple(plain)
    return plain


def _live(value: Any) -> bool:
    from .tools.mcp import MCPSessions

    return isinstance(value, MCPSessions)


def _shipped(name: str, value: Any) -> Any:
    kind = OPTIONS[name].ships
    if kind == "no":
        if value is None:
            return None
        raise ValueError(f"{name}= and a Dask batch (--workers, --engine dask) cannot be combined: "
                         "a function cannot be shipped to workers")
    if kind == "model":
        if value is not None and not isinstance(value, str):
            raise ValueError(
                f"model= must be a model string for a Dask batch (e.g. 'openai-chat:gpt-4o-mini', or None for "
                f"the workers' STRUCKDOWN_MODEL / LLM_API_BASE), not a {type(value).__name__} object: a Model "
                "cannot be shipped to workers. For a custom Model, pass model_factory='package.module:function', "
                "a function importable on the workers that returns it"
            )
        return value
    if kind == "models":
        models = (value,) if isinstance(value, str) or value is None else tuple(value)
        if not all(isinstance(m, str) for m in models if m is not None):
            raise ValueError(f"{name}= must be model strings for a Dask batch (a Model object cannot be shipped)")
        return value if isinstance(value, str) or value is None else tuple(models)
    if kind == "tools":
        return tuple(_tool_spec(tool) for tool in value or ())
    if kind == "mcp":
        return _mcp_spec(value)
    if kind == "cache":
        return _cache_spec(value)
    if kind == "decision":
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name}= must be True or False for a Dask batch: a function or object cannot be "
                             "shipped to workers")
        return value
    if kind == "limits" or kind == "caller":
        return value
    if kind == "path":  # the workers write beside it (run/durable/shards.py): the same place for them
        return None if value is None else os.path.abspath(os.fspath(value))
    if isinstance(value, Mapping):
        value = dict(value)
    if name == "deps":
        _check_json("deps", value, hint="for live objects pass deps_factory='package.module:function'")
    else:
        _check_json(name, value)
    return value


def _check_json(what: str, value: Any, hint: str = "") -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        extra = f"; {hint}" if hint else ""
        raise ValueError(f"{what}= must be JSON-able plain data for a Dask batch ({exc}){extra}") from None


def _tool_spec(tool: Any) -> tuple[str, ...]:
    """("name", "pkg.mod:func" | "pkg.mod") or ("file", path, source) for a `.py` file."""
    if isinstance(tool, os.PathLike) or (isinstance(tool, str) and tool.endswith(".py")):
        path = Path(tool).expanduser().resolve()
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"tools file {tool} cannot be read: {exc}") from None
        return ("file", str(path), source)
    if isinstance(tool, str):
        module, _, attr = tool.partition(":")
        if not module or not all(part.isidentifier() for part in module.split(".")) or (":" in tool and not attr):
            raise ValueError(
                f"tool {tool!r} is not an importable name: use 'package.module:function', "
                "'package.module' (its public functions) or a path to a .py file"
            )
        return ("name", tool)
    function = getattr(tool, "function", tool)
    home = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    suggestion = f" such as '{home}:{qualname}'" if home and qualname and "<" not in qualname else ""
    raise ValueError(
        f"tools for a Dask batch must be importable names{suggestion}, not {type(tool).__name__} objects: "
        "functions cannot be shipped to workers, the workers import them"
    )


def _mcp_spec(mcp: Any) -> tuple[dict[str, Any], ...] | None:
    """MCP servers as plain data; each worker opens one session per server for the batch."""
    if mcp is None:
        return None
    from .tools.mcp import resolve_servers

    plain = [spec.plain() for spec in resolve_servers(mcp)]
    if any(p is None for p in plain):
        raise ValueError(
            "mcp= for a Dask batch takes URLs, commands, .py paths and mcp.json files (each worker opens its "
            "own sessions), not toolset or capability objects"
        )
    return tuple(p for p in plain if p is not None)


def _cache_spec(cache: Any) -> bool | str | None:
    if cache is None or isinstance(cache, bool):
        return cache
    if isinstance(cache, str | os.PathLike):
        return os.fspath(cache)
    raise ValueError(
        "cache= must be True, False, None or a directory for a Dask batch (each worker opens it), "
        f"not a {type(cache).__name__} object"
    )


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
