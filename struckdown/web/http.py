"""What the playground's endpoints and the template API (`api.py`) share: the HTTP error
they raise, its JSON answer, and a JSON body read within its size limit."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, counted as it arrives (a chunked body has no length)."""
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"request body over {limit:,} bytes")
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        raise HttpError(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise HttpError(400, "the body must be a JSON object")
    return data
