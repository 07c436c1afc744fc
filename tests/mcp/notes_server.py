"""A small MCP server written for the tests (the `mcp` package's MCPServer, formerly FastMCP).

Its tools: `lookup` (readOnlyHint), `remember` (no hints: it writes), `erase`
(destructiveHint), `hang` (never returns, for cancellation) and `fail` (raises).
`Record` counts the sessions clients open (one `server/discover` or `initialize`
each) and the tool calls, and holds gates a test releases.

Run as a script it serves stdio; `--log FILE` appends `<pid>` when the process
starts, so a test can count the processes (one per stdio session) and check they end.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

SESSION_METHODS = ("server/discover", "initialize")


@dataclass
class Record:
    sessions: int = 0
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: set when the tool of that name starts running on the server
    reached: dict[str, threading.Event] = field(default_factory=dict)
    #: a tool of that name waits for its gate (when there is one) before it answers
    gates: dict[str, threading.Event] = field(default_factory=dict)

    def event(self, name: str) -> threading.Event:
        return self.reached.setdefault(name, threading.Event())

    async def arrive(self, tool: str, **arguments: Any) -> None:
        self.calls.append((tool, arguments))
        self.event(tool).set()
        gate = self.gates.get(tool)
        if gate is not None:
            await anyio.to_thread.run_sync(gate.wait)


def build(record: Record) -> MCPServer[Any]:
    async def count_sessions(ctx: Any, call_next: Any) -> Any:
        if ctx.method in SESSION_METHODS:
            record.sessions += 1
        return await call_next(ctx)

    server: MCPServer[Any] = MCPServer("notes", middleware=[count_sessions], log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def lookup(word: str) -> str:
        """Look a word up in the notes."""
        await record.arrive("lookup", word=word)
        return f"{word}: a note about {word}"

    @server.tool()
    async def remember(note: str) -> str:
        """Write a note."""
        await record.arrive("remember", note=note)
        return f"remembered {note}"

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    async def erase(name: str) -> str:
        """Erase a note for good."""
        await record.arrive("erase", name=name)
        return f"erased {name}"

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        await record.arrive("hang")
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool()
    async def fail(name: str) -> str:
        """Always fails."""
        await record.arrive("fail", name=name)
        raise ToolError(f"no note called {name}")

    return server


if __name__ == "__main__":
    if "--log" in sys.argv:
        with open(sys.argv[sys.argv.index("--log") + 1], "a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
    build(Record()).run()
