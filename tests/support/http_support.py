"""A stdlib HTTP handler served on 127.0.0.1 for a test, that stops at once.

`serve_forever` notices `shutdown()` only when its poll interval ends (half a second by
default, every test's teardown); here the loop handles one request at a time and the stop
wakes it with a last, empty connection, so stopping waits for nothing.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def http_serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`http://127.0.0.1:PORT` while `handler` answers there (each request in its own thread)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            httpd.handle_request()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        socket.create_connection(("127.0.0.1", port)).close()  # wakes a loop waiting for a request
        thread.join()
        httpd.server_close()
