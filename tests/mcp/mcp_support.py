"""What the MCP tests share: the test server's record, serving an app over HTTP in a
thread, and the command that runs the test server over stdio."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the MCP server stack is imported when a server starts, not at collection
    from notes_server import Record

HERE = Path(__file__).parent
SERVER_SCRIPT = HERE / "notes_server.py"


@dataclass
class HttpServer:
    url: str
    record: Record

    def reset(self) -> Record:
        """A fresh record for the next test (the server stays up)."""
        self.record.sessions = 0
        self.record.calls.clear()
        self.record.reached.clear()
        self.record.gates.clear()
        return self.record


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve an ASGI app (an MCP server's streamable HTTP app) on a free port of 127.0.0.1
    in a thread of its own; yields the MCP endpoint's URL."""
    import asyncio

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio sets TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    started = threading.Event()

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            try:
                await super().startup(sockets=sockets)
            finally:
                started.set()  # listening now (or failed to start: `server.started` tells)

    server = Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def serve() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        finally:
            started.set()  # a server that never reached startup ends the wait too

    thread = threading.Thread(target=serve, name="mcp-http-server", daemon=True)
    thread.start()
    started.wait()
    assert server.started, "the MCP test server did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(30)  # only a guard against hanging the suite
        sock.close()


def stdio_command(log: Path) -> str:
    """The command that runs the test server over stdio, appending its pid to `log`."""
    return f"{sys.executable} {SERVER_SCRIPT} --log {log}"
