"""The playground's HTTP side: a Starlette app of JSON endpoints, SSE streams and the page.

Every request passes `Gate` first (token, per-key rate, body size); template work
goes to the worker pool (`pool.py`); files are read and saved only under the
`sd edit` folder, and `sd serve` has no file endpoints at all.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .config import WebConfig
from .http import HttpError, _error, read_json
from .pool import WorkerPool

STATIC = Path(__file__).parent / "static"
ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
EDITABLE = frozenset({".sd", ".json", ".yaml", ".yml", ".jsonl", ".csv", ".txt", ".md"})
LISTED = {".sd": "templates", ".json": "contexts", ".yaml": "contexts", ".yml": "contexts"}
SKIPPED_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache"})
MAX_FILES = 2000
MAX_FILE_BYTES = 2_000_000
KEPT_BATCHES = 32
API_PREFIX = "/v1/templates/"  # sd serve --api: each is a run
RUN_PATHS = frozenset({"/api/run", "/api/batch", "/api/approval"})
LIGHT_FACTOR = 10  # checks and plans a minute per run a minute: the page checks as the author types

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


# -- the gate: token, rate, size --------------------------------------------------------
class Gate:
    """ASGI middleware in front of every route, the page and its assets included."""

    def __init__(self, app: Any, config: WebConfig) -> None:
        self.app = app
        self.config = config
        self.hits: dict[str, deque[float]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        key = self._key(request)
        if key is None:
            await _error(401, "a valid token is required: Authorization: Bearer TOKEN, or ?token=TOKEN")(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})["api_key"] = key  # who asked: approvals and downloads are the key's
        refusal = self._rate(key, request.url.path)
        if refusal is not None:
            await _error(429, refusal, {"Retry-After": "60"})(scope, receive, send)
            return
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.config.max_body_bytes):
            await _error(413, f"request body over {self.config.max_body_bytes:,} bytes")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _key(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else request.query_params.get("token", "")
        for token in self.config.tokens:
            if given and hmac.compare_digest(given.encode(), token.encode()):
                return token
        return None

    def _rate(self, key: str, path: str) -> str | None:
        """Runs and batches count against the key's rate; the page's other calls (a
        check as the author types, the plan) against ten times that."""
        limit = self.config.rate_per_minute
        if limit <= 0 or not path.startswith(("/api/", API_PREFIX)):
            return None
        if path in RUN_PATHS or path.startswith(API_PREFIX):
            bucket, what = "run", "runs"
        else:
            bucket, what, limit = "other", "requests", limit * LIGHT_FACTOR
        now = time.monotonic()
        hits = self.hits.setdefault(f"{bucket}:{key}", deque())
        while hits and now - hits[0] >= 60.0:
            hits.popleft()
        if len(hits) >= limit:
            return f"more than {limit} {what} a minute with this key"
        hits.append(now)
        return None


def _text(data: dict[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise HttpError(400, f"{name!r} must be a string")
    return value


def _required(data: dict[str, Any], name: str) -> str:
    value = _text(data, name)
    if value is None:
        raise HttpError(400, f"{name!r} is required")
    return value


# -- the application ----------------------------------------------------------------------
class Playground:
    def __init__(self, config: WebConfig) -> None:
        self.config = config
        self.pool = WorkerPool(config.limits, shared=config.shared)
        self.root = config.root.resolve() if config.root is not None else None
        self.batches: dict[str, tuple[Path, str]] = {}  # batch id -> (its folder, the API key that ran it)
        self.state_secret = secrets.token_bytes(32)  # signs paused states; each API key gets its own key from it
        self.scratch: Path | None = None
        self._tools: list[dict[str, Any]] | None = None

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.scratch = Path(tempfile.mkdtemp(prefix="sd-playground-"))
        self.pool.warm()
        try:
            yield
        finally:
            await self.pool.close()
            shutil.rmtree(self.scratch, ignore_errors=True)

    def routes(self) -> list[Route]:
        routes = [
            Route("/", self.page),
            Route("/static/{name}", self.asset),
            Route("/api/config", self.settings),
            Route("/api/check", self.check, methods=["POST"]),
            Route("/api/explain", self.explain, methods=["POST"]),
            Route("/api/run", self.run, methods=["POST"]),
            Route("/api/batch", self.batch, methods=["POST"]),
            Route("/api/batch/{batch_id}/output.{fmt}", self.download),
            Route("/api/approval", self.approval, methods=["POST"]),
        ]
        if not self.config.shared:
            routes += [Route("/api/files", self.files), Route("/api/file", self.file, methods=["GET", "PUT"])]
        return routes

    # -- page --------------------------------------------------------------------
    async def page(self, request: Request) -> Response:
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        token = request.query_params.get("token", "")
        query = "?token=" + _quote(token) if token else ""
        return HTMLResponse(html.replace("{{asset_query}}", query), headers={"Cache-Control": "no-store"})

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return _error(404, "no such asset")
        return FileResponse(STATIC / name, media_type=ASSETS[name])

    async def settings(self, request: Request) -> Response:
        return JSONResponse(
            {
                "mode": self.config.mode,
                "root": str(self.root) if self.root is not None else None,
                "models": list(self.config.models),
                "free_model": not self.config.models and not self.config.shared,
                "tools": await self._operator_tools(),
                "limits": {
                    "max_body_bytes": self.config.max_body_bytes,
                    "rate_per_minute": self.config.rate_per_minute,
                    "time_limit_s": self.config.limits.time_limit_s,
                },
                "approvals": True,  # SPEC §12: a paused run's calls are decided on the page
            }
        )

    async def _operator_tools(self) -> list[dict[str, Any]]:
        if self.config.tools_file is None:
            return []
        if self._tools is None:
            messages = await self.pool.one({"op": "tools", "tools": str(self.config.tools_file)})
            self._tools = next((m["tools"] for m in messages if m.get("type") == "tools"), [])
        return self._tools

    # -- files (sd edit) ---------------------------------------------------------------
    def _inside(self, relative: str | None) -> Path:
        if self.root is None:
            raise HttpError(404, "this server has no files")
        if not relative or "\0" in relative:
            raise HttpError(400, "a path inside the folder is required")
        if Path(relative).is_absolute():
            raise HttpError(403, f"{relative!r} is not inside the folder")
        path = (self.root / relative).resolve()
        if path != self.root and self.root not in path.parents:
            raise HttpError(403, f"{relative!r} is not inside the folder")
        return path

    async def files(self, request: Request) -> Response:
        assert self.root is not None
        found: dict[str, list[str]] = {"templates": [], "contexts": [], "tools": [], "inputs": []}
        count = 0
        for directory, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(names):
                suffix = Path(name).suffix.lower()
                group = LISTED.get(suffix) or ("inputs" if suffix in (".csv", ".jsonl") else None)
                if group is None:
                    continue
                found[group].append(str((Path(directory) / name).relative_to(self.root)))
                count += 1
                if count >= MAX_FILES:
                    break
        found["tools"] = list(self._tool_choices())  # never the folder's .py files: only those chosen
        return JSONResponse({"root": str(self.root), **found})

    def _tool_choices(self) -> dict[str, Path]:
        """`sd edit --tools` files by the name the page shows (relative to the folder when inside it)."""
        assert self.root is not None
        return {(str(p.relative_to(self.root)) if self.root in p.parents else str(p)): p for p in self.config.tool_files}

    def _chosen_tools(self, name: str) -> Path:
        """The tools file a request names: one given with `sd edit --tools`, never any other
        `.py` file (a request cannot make the server import code the user did not choose)."""
        path = self._tool_choices().get(name)
        if path is None:
            given = ", ".join(self._tool_choices()) or "none were given"
            raise HttpError(
                403, f"sd edit runs only the tools files given with --tools ({given}); to use {name!r}, "
                f"restart it with sd edit --tools {name}",
            )
        return path

    async def file(self, request: Request) -> Response:
        if request.method == "GET":
            path = self._inside(request.query_params.get("path"))
            if not path.is_file():
                raise HttpError(404, "no such file")
            if path.stat().st_size > MAX_FILE_BYTES:
                raise HttpError(413, "the file is too large to edit here")
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise HttpError(415, "not a UTF-8 text file") from None
            return JSONResponse({"path": request.query_params["path"], "text": text})
        data = await read_json(request, self.config.max_body_bytes)
        relative = _required(data, "path")
        content = _required(data, "text")
        path = self._inside(relative)
        if path.suffix.lower() not in EDITABLE:
            raise HttpError(403, f"the playground saves only {', '.join(sorted(EDITABLE))} files")
        if not path.parent.is_dir():
            raise HttpError(404, "the folder of that file does not exist")
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, path)
        return JSONResponse({"path": relative, "saved": len(content.encode())})

    # -- template work -------------------------------------------------------------------
    def _state_key(self, request: Request) -> str:
        """The key this server signs and checks the paused states of `request`'s API key with."""
        api_key = str(request.scope["state"]["api_key"])
        return hmac.new(self.state_secret, b"paused-state\0" + api_key.encode(), "sha256").hexdigest()

    def _tenant(self, request: Request) -> str:
        """An id of the asking API key (not the key): part of its runs' prompt-cache keys."""
        api_key = str(request.scope["state"]["api_key"])
        return hmac.new(self.state_secret, b"tenant\0" + api_key.encode(), "sha256").hexdigest()[:16]

    def _job(self, op: str, data: dict[str, Any], request: Request | None = None) -> dict[str, Any]:
        job: dict[str, Any] = {"op": op, "template": _required(data, "template")}
        job["policy"] = self.config.model_policy.to_dict()  # every marked option of the template (SPEC §30)
        if request is not None:
            job["state_key"] = self._state_key(request)
            if self.config.shared:  # provider prompt-cache keys are the asking API key's (issue 47)
                job["policy"]["tenant"] = self._tenant(request)
        context = _text(data, "context")
        kind = data.get("context_kind", "json")
        if kind not in ("json", "yaml"):
            raise HttpError(400, "context_kind is json or yaml")
        job.update(context=context, context_kind=kind)
        tools = _text(data, "tools")
        if self.config.shared:
            if tools:
                raise HttpError(403, "this server runs only the tools its operator provides")
            if data.get("path"):
                raise HttpError(403, "this server has no files: send the template text")
            job["tools"] = str(self.config.tools_file) if self.config.tools_file else None
        else:
            path = _text(data, "path")
            job["path"] = str(self._inside(path)) if path else None
            job["tools"] = str(self._chosen_tools(tools)) if tools else None
        if op in ("run", "batch"):
            model = _text(data, "model") or None
            refusal = self.config.model_refusal(model)
            if refusal:
                raise HttpError(403, refusal)
            job["model"] = model or self.config.default_model()
            job["cache"] = bool(data.get("cache")) and not self.config.shared
        return job

    async def check(self, request: Request) -> Response:
        job = self._job("check", await read_json(request, self.config.max_body_bytes))
        return self._answer(await self.pool.one(job), "diagnostics")

    async def explain(self, request: Request) -> Response:
        job = self._job("explain", await read_json(request, self.config.max_body_bytes))
        return self._answer(await self.pool.one(job), "plan", "diagnostics")

    @staticmethod
    def _answer(messages: list[dict[str, Any]], *wanted: str) -> Response:
        for message in messages:
            if message.get("type") in wanted:
                return JSONResponse(message)
            if message.get("type") == "refused":
                return _error(403, message["error"])
        error = next((m["error"] for m in messages if m.get("type") == "processing_error"), "no answer")
        return _error(422, error)

    async def run(self, request: Request) -> Response:
        job = self._job("run", await read_json(request, self.config.max_body_bytes), request)
        return await self._sse(job)

    async def _sse(
        self, job: dict[str, Any], edit: Callable[[dict[str, Any]], dict[str, Any]] = lambda m: m
    ) -> Response:
        """Refusals before the first event are HTTP errors; after it, events."""
        return await self._sse_stream(job, lambda message: [_sse_line(edit(message))])

    async def _sse_stream(
        self, job: dict[str, Any], frames: Callable[[dict[str, Any]], list[bytes]], headers: dict[str, str] | None = None
    ) -> Response:
        """A job's messages as an event stream, each message turned into `frames` (bytes
        to send); a refusal before the first message is an HTTP 403."""
        stream = self.pool.stream(job)
        first = await anext(stream, None)
        if first is not None and first.get("type") == "refused":
            await stream.aclose()
            return _error(403, first["error"])

        async def body() -> AsyncIterator[bytes]:
            try:
                if first is not None:
                    for frame in frames(first):
                        yield frame
                async for message in stream:
                    for frame in frames(message):
                        yield frame
            finally:
                await stream.aclose()

        return StreamingResponse(
            body(), media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no", **(headers or {})},
        )

    async def batch(self, request: Request) -> Response:
        data = await read_json(request, self.config.max_body_bytes)
        job = self._job("batch", data, request)
        filename = _text(data, "filename") or "rows.jsonl"
        if Path(filename).suffix.lower() not in (".csv", ".jsonl", ".ndjson", ".json", ".txt"):
            raise HttpError(400, "upload a .csv, .jsonl or .json file")
        jobs = data.get("jobs", 4)
        if not isinstance(jobs, int) or not 1 <= jobs <= 16:
            raise HttpError(400, "jobs is a whole number from 1 to 16")
        assert self.scratch is not None
        batch_id = secrets.token_urlsafe(12)
        folder = self.scratch / batch_id
        folder.mkdir()
        self.batches[batch_id] = (folder, str(request.scope["state"]["api_key"]))
        while len(self.batches) > KEPT_BATCHES:
            shutil.rmtree(self.batches.pop(next(iter(self.batches)))[0], ignore_errors=True)
        job.update(filename=filename, content=_required(data, "content"), folder=str(folder), jobs=jobs)
        if self.config.shared and self.config.rate_per_minute > 0:
            # every row is a run: a batch may not hold more than the key may start a minute (issue 47)
            job["max_rows"] = self.config.rate_per_minute

        def with_downloads(message: dict[str, Any]) -> dict[str, Any]:
            if message.get("type") == "batch_complete":
                message["downloads"] = {f: f"/api/batch/{batch_id}/output.{f}" for f in message["formats"]}
            return message

        return await self._sse(job, with_downloads)

    async def download(self, request: Request) -> Response:
        kept = self.batches.get(request.path_params["batch_id"])
        fmt = request.path_params["fmt"]
        # another API key's batch is not there for this one (issue 39 N15): the same 404
        if kept is None or not hmac.compare_digest(kept[1], str(request.scope["state"]["api_key"])):
            return _error(404, "no such batch output")
        folder = kept[0]
        if fmt not in ("jsonl", "csv") or not (folder / f"output.{fmt}").is_file():
            return _error(404, "no such batch output")
        media = "text/csv" if fmt == "csv" else "application/x-ndjson"
        return FileResponse(folder / f"output.{fmt}", media_type=media, filename=f"batch-output.{fmt}")

    async def approval(self, request: Request) -> Response:
        """The page's decisions on a paused run (SPEC §12): the run's fields as for
        /api/run, plus the `state` the paused run sent and `decisions` {request_id: true |
        false | "reason"}; the run continues as an event stream."""
        data = await read_json(request, self.config.max_body_bytes)
        return await self._sse(self.approval_job(data, request))

    def approval_job(self, data: dict[str, Any], request: Request) -> dict[str, Any]:
        """The job that continues a paused run: `data` holds the run's fields (as for a
        run), the `state` it sent and the `decisions`."""
        job = self._job("run", data, request)
        state, decisions = data.get("state"), data.get("decisions")
        if not isinstance(state, dict) or not isinstance(decisions, dict):
            raise HttpError(400, "'state' (what the paused run sent) and 'decisions' must be JSON objects")
        if not all(isinstance(v, (bool, str)) for v in decisions.values()):
            raise HttpError(400, "each decision is true, false or the text the model reads")
        job["resume"] = {"state": state, "decisions": decisions}
        return job


def _sse_line(message: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(message, ensure_ascii=False).encode() + b"\n\n"


def _quote(token: str) -> str:
    from urllib.parse import quote

    return quote(token, safe="")


def create_app(config: WebConfig) -> Starlette:
    from starlette.middleware import Middleware

    playground = Playground(config)
    routes = playground.routes()
    if config.api_root is not None:
        from .api import TemplateApi

        routes = TemplateApi(playground, config.api_root).routes() + routes
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Gate, config=config)],
        exception_handlers={HttpError: _http_error},  # type: ignore[dict-item]
        lifespan=playground.lifespan,
    )
    app.state.playground = playground
    return app


async def _http_error(request: Request, exc: HttpError) -> Response:
    return _error(exc.status, exc.message)
