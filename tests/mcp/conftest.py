"""The MCP test servers: `notes_server.py` over streamable HTTP in this process (one per
test module, on a free port of 127.0.0.1), and the command that runs it over stdio."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from notes_server import Record, build  # noqa: E402

SERVER_SCRIPT = HERE / "notes_server.py"

# Needs the approval machinery (issue 15, branch approval): delete this line once it is merged.
collect_ignore = ["test_mcp_approval.py"]


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

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    started = threading.Event()

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not task.done():  # uvicorn tells it listens only by this flag
            await asyncio.sleep(0.005)
        started.set()
        await task

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name="mcp-http-server", daemon=True)
    thread.start()
    assert started.wait(30), "the MCP test server did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    record = Record()
    with serving(build(record).streamable_http_app()) as url:
        yield HttpServer(url, record)


@pytest.fixture
def notes(http_server: HttpServer) -> Iterator[HttpServer]:
    """The module's HTTP server with a fresh record; gates left closed are opened at the end."""
    http_server.reset()
    yield http_server
    for gate in http_server.record.gates.values():
        gate.set()


def stdio_command(log: Path) -> str:
    """The command that runs the test server over stdio, appending its pid to `log`."""
    return f"{sys.executable} {SERVER_SCRIPT} --log {log}"
