"""MCP servers as slot tools (SPEC §16).

`resolve_servers(mcp)` turns what a caller passes as `mcp=` (URLs, `.py` paths,
commands, an `mcp.json` in the Claude Desktop format, pydantic-ai `MCPToolset` or
`MCP` objects, a mapping of names to any of these) into named `ServerSpec`s. It
reads strings and files only: the MCP stack (the `mcp` package, fastmcp,
`pydantic_ai.mcp`) is imported when a session opens, never before.

`MCPSessions` holds one session per server for a run, or for a whole batch: a
server's session opens when a slot first needs its tools and closes in `aclose()`,
which the entry points call when the run (or batch) ends, also on an error or a
cancellation. `slot_tools()` gives a slot the toolsets of the servers it may use,
named `<server>_<tool>`, with the names the guard join may treat as read-only
(`readOnlyHint: true`); a tool annotated `destructiveHint: true` gets
`ToolDefinition.kind == 'unapproved'`, which the approval machinery acts on (§12).
The per-slot tool wrapper (run/tools.py) wraps these toolsets like any other, so
events, the call cache, budgets and timeouts apply unchanged.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from ..errors import ConfigurationError, MCPServerError, StruckdownError, TemplateRuntimeError

if TYPE_CHECKING:
    from ..plan import Program

from ..log import logger as log

#: What a server name may hold (it prefixes tool names, which providers restrict).
NAME = re.compile(r"[A-Za-z0-9_-]+")
_NAMED = re.compile(r"([A-Za-z0-9_-]+)=(\S.*)", re.S)
#: Launchers whose first plain argument names the server (`npx -y @scope/server-x` → server-x).
_LAUNCHERS = frozenset({
    "python", "python3", "uv", "uvx", "npx", "node", "bun", "bunx", "deno", "pipx", "docker", "sh", "bash",
})  # fmt: skip
_LAUNCHER_WORDS = frozenset({"run", "exec", "tool", "-m"})
#: Seconds a stdio server may take to start and answer the handshake.
STDIO_START_TIMEOUT = 30.0
_ENV_REFERENCE = re.compile(r"\$\{([^}:]+)(:-([^}]*))?\}")


@dataclass(frozen=True)
class ServerSpec:
    """One MCP server of a run, by name. `kind` says how to reach it: "http" (a URL,
    streamable HTTP, or SSE when the path ends in /sse), "stdio" (a command) or "object"
    (a pydantic-ai toolset or `MCP` capability the caller built)."""

    name: str
    kind: Literal["http", "stdio", "object"]
    url: str | None = None
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] | None = None
    cwd: str | None = None
    headers: tuple[tuple[str, str], ...] | None = None
    obj: Any = field(default=None, compare=False)
    prefixed: bool = False  # the object already names its tools `<name>_<tool>`
    allowed: frozenset[str] | None = None  # an MCP capability's allowed_tools (the server's own names)
    capability: bool = False  # made from an `MCP` capability (its wrappers are known: filter, prefix)

    def plain(self) -> dict[str, Any] | None:
        """The spec as plain data (to ship to Dask workers); None for an object."""
        if self.kind == "object":
            return None
        return {
            "name": self.name, "kind": self.kind, "url": self.url, "command": list(self.command),
            "env": dict(self.env) if self.env is not None else None, "cwd": self.cwd,
            "headers": dict(self.headers) if self.headers is not None else None,
        }  # fmt: skip

    @classmethod
    def from_plain(cls, data: Mapping[str, Any]) -> ServerSpec:
        env, headers = data.get("env"), data.get("headers")
        return cls(
            name=data["name"], kind=data["kind"], url=data.get("url"), command=tuple(data.get("command") or ()),
            env=tuple(sorted(env.items())) if env is not None else None, cwd=data.get("cwd"),
            headers=tuple(sorted(headers.items())) if headers is not None else None,
        )  # fmt: skip

    def toolset(self, log_file: Path | None = None) -> Any:
        """The pydantic-ai toolset to open (not yet entered). A URL or a command gets a
        new `MCPToolset` (so a new session); an object is the caller's own. A stdio
        server's stderr is appended to `log_file` (mcp_logs.py), not inherited."""
        if self.kind == "object":
            return self.obj
        try:
            from pydantic_ai.mcp import MCPToolset
        except ImportError as exc:
            raise ConfigurationError(
                "MCP servers need the mcp extra: pip install 'struckdown[mcp]' (it brings pydantic-ai-slim[mcp])"
            ) from exc
        if self.kind == "http":
            assert self.url is not None
            return MCPToolset(
                self.url, id=self.name, tool_error_behavior="error", headers=dict(self.headers) if self.headers else None
            )
        from fastmcp.client.transports import StdioTransport

        program, *args = self.command
        transport = StdioTransport(
            program, list(args), env=dict(self.env) if self.env is not None else None, cwd=self.cwd,
            keep_alive=False, log_file=log_file,  # the process ends with its session
        )  # fmt: skip
        # a stdio server may need a while to start (an interpreter, npx fetching a package)
        return MCPToolset(transport, id=self.name, tool_error_behavior="error", init_timeout=STDIO_START_TIMEOUT)


# -- what `mcp=` may be --------------------------------------------------------------------


def resolve_servers(value: Any) -> tuple[ServerSpec, ...]:
    """Named specs for `mcp=`: one spec, a list of them, or a mapping {name: spec}.
    Raises ValueError (or TypeError) naming what is wrong, before anything opens."""
    if value is None:
        return ()
    if isinstance(value, MCPSessions):
        return value.servers
    if isinstance(value, tuple) and value and all(isinstance(v, ServerSpec) for v in value):
        return value
    specs: list[ServerSpec] = []
    if isinstance(value, Mapping):
        for name, item in value.items():
            specs += _specs(item, name=_checked_name(str(name)))
    elif isinstance(value, (str, os.PathLike)) or not isinstance(value, Iterable):
        specs += _specs(value)
    else:
        for item in value:
            specs += _specs(item)
    seen: dict[str, ServerSpec] = {}
    for spec in specs:
        if spec.name in seen:
            raise ValueError(
                f"two MCP servers are named {spec.name!r}; name them yourself: "
                "mcp={'a': …, 'b': …} in Python, --mcp a=URL on the command line"
            )
        seen[spec.name] = spec
    return tuple(specs)


def _checked_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid MCP server name: use letters, digits, _ and -")
    return name


def _specs(item: Any, name: str | None = None) -> list[ServerSpec]:
    if isinstance(item, os.PathLike):
        item = os.fspath(item)
    if isinstance(item, str):
        text = item.strip()
        named = _NAMED.fullmatch(text)
        if name is None and named is not None:
            name, text = named.group(1), named.group(2).strip()
        if not text:
            raise ValueError("an empty MCP server: give a URL, a command or a path")
        if text.startswith(("http://", "https://")):
            return [ServerSpec(name or _url_name(text), "http", url=text)]
        if text.endswith(".json") and not any(ch.isspace() for ch in text):
            if name is not None:
                raise ValueError(f"{text} is an mcp.json config: its servers are named in it, pass it without a name")
            return load_config(text)
        return [_command_spec(text, name)]
    return [_object_spec(item, name)]


def _url_name(url: str) -> str:
    """A server's default name from its URL: the first label of the host that says
    something (`https://mcp.deepwiki.com/mcp` → deepwiki); "mcp" for a bare address."""
    host = urlparse(url).hostname or ""
    labels = host.split(".")
    if len(labels) > 1 and not labels[-1].isdigit():
        labels = labels[:-1]  # the top-level domain
    for label in labels:
        if label and not label.isdigit() and label not in ("www", "mcp", "api"):
            return _sanitized(label)
    return "mcp"


def _sanitized(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")
    return cleaned or "mcp"


def _command_spec(text: str, name: str | None) -> ServerSpec:
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"MCP server command {text!r} cannot be split into words: {exc}") from None
    if words[0].endswith(".py"):
        script = Path(words[0]).expanduser()
        if not script.is_file():
            raise ValueError(f"MCP server script {words[0]} does not exist")
        command = (sys.executable, str(script.resolve()), *words[1:])
        return ServerSpec(name or _sanitized(script.stem), "stdio", command=command)
    program = shutil.which(words[0])
    if program is None:
        raise ValueError(f"MCP server command {words[0]!r} is not a file or a program on PATH")
    return ServerSpec(name or _command_name(words), "stdio", command=tuple(words))


def _command_name(words: Sequence[str]) -> str:
    """`npx -y @modelcontextprotocol/server-memory` → server-memory; `./my-server` → my-server."""
    first = Path(words[0]).name
    if re.sub(r"[\d.]+$", "", first) in _LAUNCHERS:
        for word in words[1:]:
            if word.startswith("-") or word in _LAUNCHER_WORDS:
                continue
            base = word.rstrip("/").rsplit("/", 1)[-1]
            return _sanitized(re.sub(r"\.(py|js|mjs|ts)$", "", base).split("@")[0] or base)
    return _sanitized(Path(first).stem)


def _object_spec(item: Any, name: str | None) -> ServerSpec:
    from pydantic_ai.toolsets import AbstractToolset, PrefixedToolset

    try:
        from pydantic_ai.capabilities import MCP
    except ImportError:  # pragma: no cover - an older pydantic-ai
        MCP = None  # type: ignore[assignment,misc]
    if MCP is not None and isinstance(item, MCP):
        if item.native is not False and item.local in (None, False):
            raise ValueError("an MCP capability with native=True only is run by the provider, not as slot tools")
        toolset = item.get_toolset()
        allowed = frozenset(item.allowed_tools) if item.allowed_tools is not None else None
        prefix = item.id if item.tool_prefix is True else item.tool_prefix
        if isinstance(prefix, str) and prefix:
            if name is not None and name != prefix:
                raise ValueError(f"this MCP capability prefixes its tools with {prefix!r}, not {name!r}")
            return ServerSpec(
                _checked_name(prefix), "object", obj=toolset, prefixed=True, allowed=allowed, capability=True
            )
        label = name or (item.id and _sanitized(item.id))
        if not label:
            raise ValueError("name this MCP capability: MCP(..., id='notes') or mcp={'notes': capability}")
        return ServerSpec(label, "object", obj=toolset, allowed=allowed, capability=True)
    if isinstance(item, PrefixedToolset) and name in (None, item.prefix):
        return ServerSpec(_checked_name(item.prefix), "object", obj=item, prefixed=True)  # as load_mcp_toolsets makes
    if isinstance(item, AbstractToolset):
        label = name or (getattr(item, "id", None) and _sanitized(str(item.id)))
        if not label:
            raise ValueError(
                f"name this MCP toolset ({type(item).__name__} has no id): MCPToolset(..., id='notes') "
                "or mcp={'notes': toolset}"
            )
        return ServerSpec(label, "object", obj=item)
    raise TypeError(
        "mcp= takes URLs, commands, .py paths, an mcp.json path, pydantic-ai MCPToolset or MCP objects, "
        f"a list of these or a mapping of names to them; not {type(item).__name__}"
    )


def load_config(path: str | os.PathLike[str]) -> list[ServerSpec]:
    """The servers of an `mcp.json` ({"mcpServers": {name: {command, args, env, cwd} |
    {url, headers}}}, as Claude Desktop, Claude Code and Cursor write it). `${VAR}` and
    `${VAR:-default}` are read from the environment now, so a missing one is an error
    before the run."""
    where = os.fspath(path)
    try:
        data = json.loads(Path(where).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"MCP config {where} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"MCP config {where} is not valid JSON: {exc}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ValueError(f'MCP config {where} has no "mcpServers" object')
    specs: list[ServerSpec] = []
    for raw_name, entry in servers.items():
        name = _checked_name(str(raw_name))
        if not isinstance(entry, dict):
            raise ValueError(f"MCP config {where}: server {name!r} is not an object")
        entry = _expanded(entry, f"MCP config {where}: server {name!r}")
        if entry.get("command"):
            args = entry.get("args") or []
            if not isinstance(args, list):
                raise ValueError(f"MCP config {where}: server {name!r}: args must be a list")
            env = entry.get("env")
            specs.append(
                ServerSpec(
                    name, "stdio", command=(str(entry["command"]), *map(str, args)),
                    env=tuple(sorted((str(k), str(v)) for k, v in env.items())) if isinstance(env, dict) else None,
                    cwd=str(entry["cwd"]) if entry.get("cwd") else None,
                )  # fmt: skip
            )
        elif entry.get("url"):
            headers = entry.get("headers")
            specs.append(
                ServerSpec(
                    name, "http", url=str(entry["url"]),
                    headers=tuple(sorted((str(k), str(v)) for k, v in headers.items())) if isinstance(headers, dict) else None,
                )  # fmt: skip
            )
        else:
            raise ValueError(f"MCP config {where}: server {name!r} needs a command or a url")
    return specs


def _expanded(value: Any, where: str) -> Any:
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            variable, default = match.group(1), match.group(3)
            if variable in os.environ:
                return os.environ[variable]
            if match.group(2) is not None:
                return default or ""
            raise ValueError(f"{where}: environment variable ${{{variable}}} is not set")

        return _ENV_REFERENCE.sub(one, value)
    if isinstance(value, dict):
        return {k: _expanded(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expanded(v, where) for v in value]
    return value


# -- the template's `mcp=` options ---------------------------------------------------------


def server_names(value: Any) -> tuple[str, ...]:
    """A slot's `mcp=` value ("a, b", or a list from `{{ }}`) as names."""
    from ..slot_options import server_names as check

    return check(value) if not isinstance(value, tuple) else value


def check_program(program: Program, servers: Sequence[ServerSpec]) -> None:
    """Every server a slot's `mcp=` names must be a server of the run: a positioned
    TemplateSyntaxError otherwise, before any model call. `{{ }}` values wait for the slot."""
    from ..syntax.nodes import JinjaValue
    from ..syntax.source import SourceMap

    known = [s.name for s in servers]
    for slot, plan in program.plans.items():
        value = plan.control.get("mcp")
        if value is None or isinstance(value, JinjaValue):
            continue
        for name in server_names(value):
            if name in known:
                continue
            option = next((o for o in slot.options if o.key == "mcp"), None)
            pos = option.pos if option is not None else slot.pos
            src = SourceMap(program.template.source, program.template.filename).for_file(pos.filename)
            raise src.error(f"slot {slot.key!r} asks for MCP server {name!r}, which this run does not have",
                            pos.line, pos.column, _servers_hint(known))  # fmt: skip


def _servers_hint(known: Sequence[str]) -> str:
    if not known:
        return "pass mcp=… (Python) or --mcp URL|COMMAND / --mcp-config FILE (sd)"
    return f"this run's MCP servers: {', '.join(known)}"


# -- sessions --------------------------------------------------------------------------------


@dataclass
class _Open:
    """One server's open session: its toolset for slots and what its tools say of themselves."""

    entered: Any  # the toolset we entered (closed in aclose)
    toolset: Any  # what slots get: named `<server>_<tool>`, destructive tools marked
    names: frozenset[str]
    readonly: frozenset[str]
    listed: bool  # whether `names` are all its tools (False: an object we could not list)
    destructive: frozenset[str] = frozenset()  # `destructiveHint: true`, not read-only: they need approval


@dataclass(frozen=True)
class SlotTools:
    """The MCP tools of one slot run."""

    toolsets: tuple[Any, ...]
    names: frozenset[str]
    readonly: frozenset[str]
    listed: bool = True
    destructive: frozenset[str] = frozenset()  # the tools that need approval (SPEC §12, §16)

    @property
    def all_readonly(self) -> bool:
        return self.listed and self.names <= self.readonly


class MCPSessions:
    """One session per server for a run or a batch: opened when a slot first needs the
    server, closed by `aclose()` (the entry point that made it calls it when the run or
    batch ends). Usable from any task of the loop it opened on.

    A host may also make one and pass it as `mcp=` to many runs
    (`async with sd.MCPSessions(["http://…/mcp"]) as sessions: …`): the runs then share
    its sessions and leave them open; they close when the block ends.
    """

    def __init__(self, mcp: Any) -> None:
        """`mcp`: what `mcp=` takes (see `resolve_servers`)."""
        self.servers = resolve_servers(mcp)
        self._by_name = {s.name: s for s in self.servers}
        self._open: dict[str, _Open] = {}
        self._locks: dict[str, Any] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"<MCPSessions {', '.join(self._by_name) or '(none)'}; open: {', '.join(self._open) or 'none'}>"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    @property
    def open_names(self) -> tuple[str, ...]:
        return tuple(self._open)

    async def __aenter__(self) -> MCPSessions:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def slot_tools(self, slot: str, wanted: Sequence[str] | None) -> SlotTools:
        """The tools of the servers a slot may use (all of them when `wanted` is None),
        opening their sessions now if this is their first use."""
        import anyio

        names = list(self._by_name) if wanted is None else list(wanted)
        unknown = [n for n in names if n not in self._by_name]
        if unknown:
            raise TemplateRuntimeError(
                f"slot {slot!r} asks for MCP server {unknown[0]!r}, which this run does not have; "
                + _servers_hint(list(self._by_name))
            )
        missing = [n for n in names if n not in self._open]
        if len(missing) == 1:
            await self._ensure(missing[0])
        elif missing:
            async with anyio.create_task_group() as tg:
                for name in missing:
                    tg.start_soon(self._ensure, name)
        opened = [self._open[n] for n in names]
        return SlotTools(
            tuple(o.toolset for o in opened),
            frozenset().union(*(o.names for o in opened)),
            frozenset().union(*(o.readonly for o in opened)),
            all(o.listed for o in opened),
            frozenset().union(*(o.destructive for o in opened)),
        )

    async def _ensure(self, name: str) -> None:
        import anyio

        lock = self._locks.setdefault(name, anyio.Lock())
        async with lock:
            if name in self._open:
                return
            if self._closed:
                raise MCPServerError(name, "its sessions were closed when the run ended")
            self._open[name] = await self._connect(self._by_name[name])

    async def _connect(self, spec: ServerSpec) -> _Open:
        from .mcp_logs import ServerLog

        log = ServerLog.start(spec.name, spec.command) if spec.kind == "stdio" else None
        toolset = spec.toolset(log.path if log is not None else None)
        try:
            await toolset.__aenter__()
        except StruckdownError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to start or reach it
            note = log.note() if log is not None else ""
            raise MCPServerError(spec.name, f"could not open a session: {_reason(exc)}{note}") from exc
        try:
            names, readonly, listed, destructive = await _hints(toolset, spec)
        except BaseException:
            await _exit(toolset, spec.name)
            raise
        shown = toolset if spec.prefixed else toolset.prefixed(spec.name)
        return _Open(toolset, shown.prepared(_mark_destructive), names, readonly, listed, destructive)

    async def aclose(self) -> None:
        """Close every open session (shielded: also when the run was cancelled)."""
        import anyio

        self._closed = True
        opened, self._open = list(self._open.items()), {}
        if not opened:
            return
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for name, held in opened:
                    tg.start_soon(_exit, held.entered, name)


async def _exit(toolset: Any, name: str) -> None:
    try:
        await toolset.__aexit__(None, None, None)
    except Exception as exc:  # noqa: BLE001 - a failing close must not hide the run's outcome
        log.warning("closing the session of MCP server %r failed: %s", name, _reason(exc))


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _hints(toolset: Any, spec: ServerSpec) -> tuple[frozenset[str], frozenset[str], bool, frozenset[str]]:
    """Every tool name as slots see it, those annotated readOnlyHint: true and those that
    need approval (destructiveHint: true and not read-only), from the `MCPToolset` inside.
    Filters of the caller's own wrappers are not known here, so their tools count as not
    all read-only (the guard join errs on the safe side)."""
    from pydantic_ai.toolsets import PrefixedToolset

    inner, known = toolset, True
    while inner is not None and not hasattr(inner, "list_tools"):
        known = known and (spec.capability or isinstance(inner, PrefixedToolset))
        inner = getattr(inner, "wrapped", None)
    if inner is None:
        return frozenset(), frozenset(), False, frozenset()
    tools = await inner.list_tools()
    prefix = f"{spec.name}_"  # ours, or the one of the object that is already prefixed
    names, readonly, destructive = set(), set(), set()
    for tool in tools:
        if spec.allowed is not None and tool.name not in spec.allowed:
            continue
        names.add(prefix + tool.name)
        annotations = getattr(tool, "annotations", None)
        if annotations is not None and getattr(annotations, "read_only_hint", None) is True:
            readonly.add(prefix + tool.name)
        elif annotations is not None and getattr(annotations, "destructive_hint", None) is True:
            destructive.add(prefix + tool.name)
    return frozenset(names), frozenset(readonly), known, frozenset(destructive)


def annotation(tool_def: Any, hint: str) -> bool:
    """Whether an MCP tool definition carries `hint: true` (e.g. readOnlyHint)."""
    metadata = tool_def.metadata or {}
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(hint) is True


def _mark_destructive(ctx: Any, tool_defs: list[Any]) -> list[Any]:
    """`destructiveHint: true` (and not read-only, as MCP defines it) needs approval:
    pydantic-ai's `kind='unapproved'`."""
    return [
        replace(d, kind="unapproved")
        if d.kind == "function" and annotation(d, "destructiveHint") and not annotation(d, "readOnlyHint")
        else d
        for d in tool_defs
    ]


@asynccontextmanager
async def run_sessions(value: Any, program: Program) -> AsyncIterator[MCPSessions | None]:
    """The sessions of one run (or batch) for `mcp=`: made here and closed when the
    block ends, unless the caller passed an `MCPSessions` of their own. Checks the
    template's `mcp=` options against the servers first."""
    if isinstance(value, MCPSessions):
        check_program(program, value.servers)
        yield value
        return
    servers = resolve_servers(value)
    check_program(program, servers)
    if not servers:
        yield None
        return
    sessions = MCPSessions(servers)
    try:
        yield sessions
    finally:
        await sessions.aclose()


async def tools_for_slot(sessions: MCPSessions | None, slot: str, control: Mapping[str, Any]) -> SlotTools | None:
    """The MCP tools of a slot: those of the servers its `mcp=` names (every server of the
    run without one); None when the slot takes no tools or the run has no servers."""
    wanted = control.get("mcp")
    if not control.get("use_tools", wanted is not None):
        return None
    if sessions is None:
        if wanted is not None:  # a `{{ }}` value; literal ones were checked before the run
            raise TemplateRuntimeError(
                f"slot {slot!r} asks for MCP server {server_names(wanted)[0]!r}, but this run has no MCP servers; "
                + _servers_hint(())
            )
        return None
    return await sessions.slot_tools(slot, None if wanted is None else server_names(wanted))
