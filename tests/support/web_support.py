"""A playground server on 127.0.0.1 for a test, and an HTTP client for it.

The server is the real stack (uvicorn, the Starlette app, worker processes); the
socket is bound and listening before uvicorn starts, so a request sent at once
waits in the backlog instead of racing the start.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn

from struckdown.web import WebConfig, create_app

SUPPORT = Path(__file__).parent


def scripted_model_env(factory: str = "web_models:playground") -> dict[str, str]:
    """The one place the web tests pick their model: the worker processes (and `sd edit`
    run as a process) resolve the environment default `STRUCKDOWN_MODEL`, a
    `module:factory` name imported from tests/support."""
    return {
        "STRUCKDOWN_MODEL": factory,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")])),
    }


def use_scripted_model(patch: pytest.MonkeyPatch, factory: str = "web_models:playground") -> None:
    for name, value in scripted_model_env(factory).items():
        patch.setenv(name, value)


@contextlib.contextmanager
def serving(config: WebConfig) -> Iterator[str]:
    """The base URL of a running server for `config`; stopped on exit."""
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say so; without it each
    # request after the first on a kept-alive connection waited 40 ms (Nagle, delayed ACK)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every test client (loading the CA bundle costs some 30 ms a client;
    the servers are plain http on 127.0.0.1 anyway)."""
    return httpx2.create_ssl_context()


def client(base: str, token: str | None = None) -> httpx2.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.Client(base_url=base, headers=headers, timeout=30, verify=_tls())


def sse(response: Any) -> Iterator[dict[str, Any]]:
    """The `data:` messages of an event stream, as they arrive."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line[len("data: "):])


def run_events(http: httpx2.Client, body: dict[str, Any], path: str = "/api/run") -> list[dict[str, Any]]:
    with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return list(sse(response))
