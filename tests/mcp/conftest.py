"""The MCP test servers: `notes_server.py` over streamable HTTP in this process (one per
test module, on a free port of 127.0.0.1); helpers live in mcp_support.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mcp_support import HttpServer, serving  # noqa: E402

# Needs the approval machinery (issue 15, branch approval): delete this line once it is merged.


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    from notes_server import Record, build  # the MCP server stack: only where a server starts

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
