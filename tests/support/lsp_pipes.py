"""Drive the language server over pipes, byte by byte, as an editor's client would.

`Wire` speaks the LSP base protocol on a pair of file objects: `send` frames a message,
`send_raw` writes any bytes (a broken header), `receive` reads one framed message.
`InProcess` runs `struckdown.editor.server.create(...)` on a thread with `os.pipe()`s
and `ManualTimers`, so a test decides when the debounce runs out; `Subprocess` starts
`sd lsp` itself.

Ordering is the gate: the server handles messages in the order they arrive, so the
response to a request (`barrier`) proves every earlier message was handled. The read
timeout only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

SD = Path(sys.executable).parent / "sd"
TIMEOUT = 30.0


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Wire:
    def __init__(self, to_server: IO[bytes], from_server: IO[bytes]) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self.ids = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []  # what arrived while waiting for responses
        self.buffer = bytearray()
        self.legend: list[str] = []

    def send_raw(self, data: bytes) -> None:
        self.to_server.write(data)
        self.to_server.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(frame({"jsonrpc": "2.0", **message}))

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> int:
        msg_id = next(self.ids)
        self.send({"id": msg_id, "method": method, "params": params})
        return msg_id

    def _more(self) -> None:
        fd = self.from_server.fileno()
        ready, _, _ = select.select([fd], [], [], TIMEOUT)
        assert ready, f"no message from the server within {TIMEOUT} s"
        chunk = os.read(fd, 65536)
        assert chunk, "the server closed its output"
        self.buffer += chunk

    def receive(self) -> dict[str, Any]:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, _ = bytes(self.buffer).partition(b"\r\n\r\n")
        del self.buffer[: len(head) + 4]
        lengths = [int(v) for n, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if n.lower() == b"content-length"]
        assert len(lengths) == 1, head
        while len(self.buffer) < lengths[0]:
            self._more()
        message: dict[str, Any] = json.loads(bytes(self.buffer[: lengths[0]]))
        del self.buffer[: lengths[0]]
        return message

    def response(self, msg_id: int | None) -> dict[str, Any]:
        """The response with this id; notifications before it go to `notifications`."""
        while True:
            message = self.receive()
            if "method" in message and "id" not in message:
                self.notifications.append(message)
            elif message.get("id") == msg_id and "method" not in message:
                return message
            else:
                raise AssertionError(f"unexpected message while waiting for response {msg_id}: {message}")

    def call(self, method: str, params: Any) -> dict[str, Any]:
        return self.response(self.request(method, params))

    def barrier(self) -> None:
        """Every message sent before it has been handled (an unknown method's answer)."""
        answer = self.call("struckdown/barrier", None)
        assert answer["error"]["code"] == -32601, answer

    def initialize(self, options: Any = None) -> dict[str, Any]:
        result = self.call("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                          "initializationOptions": options})
        self.notify("initialized", {})
        self.legend = result["result"]["capabilities"]["semanticTokensProvider"]["legend"]["tokenTypes"]
        return result

    def close(self) -> None:
        answer = self.call("shutdown", None)
        assert answer.get("result", "missing") is None, answer
        self.notify("exit", None)


class ManualTimers:
    """`call_later` that runs nothing until the test calls `fire()`; it records every
    timer, so a test sees how many a burst started and how many it cancelled."""

    class Timer:
        def __init__(self, delay: float, callback: Callable[[], object]) -> None:
            self.delay, self.callback, self.cancelled, self.fired = delay, callback, False, False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.timers: list[ManualTimers.Timer] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def call_later(self, delay: float, callback: Callable[[], object]) -> ManualTimers.Timer:
        self.loop = asyncio.get_running_loop()
        timer = ManualTimers.Timer(delay, callback)
        self.timers.append(timer)
        return timer

    def live(self) -> list[ManualTimers.Timer]:
        return [t for t in self.timers if not t.cancelled and not t.fired]

    def fire(self) -> None:
        """Run the live timers on the server's loop (call after a `barrier`)."""
        assert self.loop is not None

        def run() -> None:
            for timer in self.live():
                timer.fired = True
                timer.callback()

        self.loop.call_soon_threadsafe(run)


class InProcess(Wire):
    def __init__(self, delay: float = 0.2) -> None:
        from struckdown.editor.server import create

        self.timers = ManualTimers()
        self.server = create(lambda: self.timers, delay)
        server_in, to_server = os.pipe()
        from_server, server_out = os.pipe()
        stdin, stdout = os.fdopen(server_in, "rb"), os.fdopen(server_out, "wb")
        self.thread = threading.Thread(target=self._run, args=(stdin, stdout), daemon=True)
        self.thread.start()
        super().__init__(os.fdopen(to_server, "wb"), os.fdopen(from_server, "rb"))

    def _run(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        try:
            self.server.start_io(stdin, stdout)  # type: ignore[arg-type]
        finally:
            stdout.close()

    def stop(self) -> None:
        self.close()
        self.to_server.close()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()
        self.from_server.close()


class Subprocess(Wire):
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [str(SD), "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        super().__init__(self.process.stdin, self.process.stdout)

    def stop(self) -> tuple[int, str]:
        self.close()
        self.to_server.close()
        code = self.process.wait(TIMEOUT)
        assert self.process.stderr is not None
        return code, self.process.stderr.read().decode()
