"""The server's side of the pipe: read bytes, frame them, decode JSON-RPC, answer errors.

pygls reads with its own loop (`pygls.io_.run_async`), which stops answering after a
bad `Content-Length` and turns a request with invalid params into a `showMessage`
instead of a response. `serve_stream` replaces that loop for stdio:

- a body that is not JSON, or a bad header (`framing`): a JSON-RPC error response with
  `id: null` (`-32700` parse error), as JSON-RPC 2.0 prescribes when the id cannot be
  known; clients log it (vscode-languageclient: "Received response message without
  id"). The server reads on.
- valid JSON that is not a JSON-RPC message: `-32600` invalid request.
- a request whose params do not fit its method: `-32602` invalid params with the id
  and the path of the bad field (`expected int @ $.params.position.line`); for a
  notification, which has no reply, a `window/logMessage` error.

Every error is also logged on stderr, which editors show in the server's output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from functools import partial
from typing import Any, BinaryIO

from cattrs import transform_error
from cattrs.errors import ClassValidationError
from cattrs.v import format_exception
from lsprotocol import types as lsp
from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import JsonRPCNotification, JsonRPCRequestMessage

from .framing import Body, Framer

log = logging.getLogger("struckdown.lsp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
CHUNK = 64 * 1024


class Dispatcher:
    """Decodes one body and hands the message to pygls's protocol, or answers the error."""

    def __init__(self, protocol: JsonRPCProtocol, converter: Any) -> None:
        self.protocol = protocol
        self.converter = converter

    def error(self, msg_id: int | str | None, code: int, message: str) -> None:
        log.error("%s", message)
        # pygls has no public call for a bare response; _send_data is its one writer path.
        # A plain dict, so that `"id": null` is written (lsprotocol's converter drops None).
        self.protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def frame_error(self, reason: str) -> None:
        self.error(None, PARSE_ERROR, f"bad message header: {reason}")

    def body(self, data: bytes) -> bool:
        """Handle one body; False when it was not JSON."""
        try:
            decoded = json.loads(data)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            self.error(None, PARSE_ERROR, f"the message body is not JSON: {exc}")
            return False
        if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
            msg_id = decoded.get("id") if isinstance(decoded, dict) else None
            self.error(_id(msg_id), INVALID_REQUEST, "not a JSON-RPC 2.0 message (an object with \"jsonrpc\": \"2.0\")")
            return True
        try:
            message = self.structure(decoded)
        except ClassValidationError as exc:
            self.invalid(decoded, _detail(exc))
            return True
        except Exception as exc:  # pygls wraps what cattrs raises
            cause = exc.__cause__
            self.invalid(decoded, _detail(cause) if isinstance(cause, ClassValidationError) else str(exc))
            return True
        try:
            self.protocol.handle_message(message)
        except Exception:
            log.exception("failed to handle %s", decoded.get("method", "a response"))
        return True

    def structure(self, data: dict[str, Any]) -> Any:
        method = data.get("method")
        if not isinstance(method, str):
            return self.protocol.structure_message(data)  # a response to one of our requests
        known = self.protocol.get_message_type(method)
        if "id" in data:
            return self.converter.structure(data, known or JsonRPCRequestMessage)
        return self.converter.structure(data, known or JsonRPCNotification)

    def invalid(self, data: dict[str, Any], detail: str) -> None:
        method = data.get("method")
        message = f"invalid params for {method}: {detail}" if method else f"invalid message: {detail}"
        if method is not None and "id" in data:
            self.error(_id(data["id"]), INVALID_PARAMS, message)
            return
        log.error("%s", message)
        self.protocol.notify(lsp.WINDOW_LOG_MESSAGE, lsp.LogMessageParams(type=lsp.MessageType.Error, message=message))


def _detail(exc: ClassValidationError) -> str:
    """cattrs's findings with the fields' wire names (`textDocument`, not `text_document`)."""
    return "; ".join(
        re.sub(r"@ (\S+)", lambda m: "@ " + re.sub(r"_([a-z])", lambda c: c.group(1).upper(), m.group(1)), line)
        for line in transform_error(exc, format_exception=_why)
    )


def _why(exc: BaseException, type_: Any) -> str:
    """cattrs's words, plus a validator's own message (`should be in range ...`)."""
    said = format_exception(exc, type_)
    return f"{said} ({str(exc).rstrip('.')})" if said == "invalid value" and str(exc) else said


def _id(value: Any) -> int | str | None:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def _reader(stream: BinaryIO, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
    """Blocking reads on a daemon thread (it never holds up the exit). On the file
    descriptor itself where there is one: a daemon thread blocked inside a buffered
    reader holds its lock, and the interpreter aborts at exit when it cannot take it."""
    read: Callable[[int], bytes]
    try:
        fd = stream.fileno()
        read = partial(os.read, fd)
    except (OSError, AttributeError, ValueError):
        read = getattr(stream, "read1", stream.read)
    while True:
        try:
            chunk = read(CHUNK)
        except (OSError, ValueError):
            chunk = b""
        try:
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
        except RuntimeError:  # the server has stopped: its loop is closed
            return
        if not chunk:
            return


async def serve_stream(stream: BinaryIO, dispatcher: Dispatcher, stop: threading.Event) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    threading.Thread(target=_reader, args=(stream, loop, queue), name="lsp-stdin", daemon=True).start()
    framer = Framer()
    while not stop.is_set():
        chunk = await queue.get()
        if not chunk:
            return
        for item in framer.feed(chunk):
            if isinstance(item, Body):
                if not dispatcher.body(item.data):
                    framer.skipping = True  # a short body's rest is not a second error
            else:
                dispatcher.frame_error(item.reason)
