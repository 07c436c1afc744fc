"""`sd serve --api DIR` (SPEC §36): each `T.sd` in DIR is `POST /v1/templates/T`, with
`GET /openapi.json` and a docs page (`GET /docs`) that renders it without any CDN.

The body is checked against the template's input schema (422 naming the field); the run
is a job of the playground's worker pool with the playground's policy (keys, rate, the
model allow-list, SPEC §30), so nothing here decides what a request may reach. The answer
is `{answers, usage, cost, halted}`, or a stream: `Accept: text/event-stream` gives the
playground's events, `?protocol=ag-ui` AG-UI events (`agui.py`), `?protocol=vercel-ai` the Vercel AI
UI message stream (`vercel.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from .http import HttpError, read_json

STATIC = Path(__file__).parent / "static"
PROTOCOLS = ("ag-ui", "vercel-ai")
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "field": {"type": "string"},  # 422: the body's property that is wrong
        "requests": {"type": "array", "items": {"type": "object"}},  # 409: the calls waiting for a decision
        "state": {"type": "object"},  # 409: the paused run, signed, for POST /api/approval
    },
    "required": ["error"],
}
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "state": {"type": "object", "description": "the paused run's state, as the 409 gave it"},
        "decisions": {"type": "object", "additionalProperties": {"type": ["boolean", "string"]},
                      "description": "request id: true (run it), false (refuse it) or the text the model reads"},
    },
    "required": ["state", "decisions"],
}
ERRORS = {
    "400": "the body is not a JSON object, an unknown protocol, an approval without state or decisions",
    "401": "no valid key", "403": "refused by the server's policy (a model, an action, a tool)",
    "404": "no such template", "409": "the run paused for a tool approval (its requests and signed state)",
    "413": "body too large", "422": "the body does not match the input schema",
    "429": "over the key's rate", "500": "the run failed",
}


class Template:
    def __init__(self, path: Path) -> None:
        from . import engine

        self.name = path.stem
        self.text = path.read_text(encoding="utf-8")
        self.schemas = engine.template_schemas(path)
        self.type = engine.type_name(self.name)
        from jsonschema import Draft202012Validator

        self.validator = Draft202012Validator(self.schemas["input"])


def load_templates(folder: Path) -> dict[str, Template]:
    """Every `*.sd` directly in `folder`, by its stem (a template that does not parse stops the start)."""
    return {path.stem: Template(path) for path in sorted(folder.glob("*.sd")) if path.is_file()}


class TemplateApi:
    def __init__(self, playground: Any, folder: Path) -> None:
        self.playground = playground
        self.templates = load_templates(folder)
        self.document = openapi(self.templates)

    def routes(self) -> list[Route]:
        return [
            Route("/openapi.json", self.openapi),
            Route("/docs", self.docs),
            Route("/v1/templates/{name}", self.run, methods=["POST"]),
            Route("/v1/templates/{name}/approval", self.approval, methods=["POST"]),
        ]

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(self.document)

    async def docs(self, request: Request) -> Response:
        return HTMLResponse((STATIC / "api-docs.html").read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})

    def _template(self, request: Request) -> Template:
        template = self.templates.get(request.path_params["name"])
        if template is None:
            raise HttpError(404, f"no template {request.path_params['name']!r} (see /openapi.json)")
        protocol = request.query_params.get("protocol")
        if protocol is not None and protocol not in PROTOCOLS:
            raise HttpError(400, f"protocol is {' or '.join(PROTOCOLS)}, not {protocol!r}")
        return template

    async def run(self, request: Request) -> Response:
        template = self._template(request)
        body = await read_json(request, self.playground.config.max_body_bytes)
        bad = body_error(template, body)
        if bad is not None:
            return JSONResponse({"error": bad[1], "field": bad[0]}, status_code=422)
        data = {"template": template.text, "context": json.dumps(body), "model": request.query_params.get("model")}
        return await self._respond(self.playground._job("run", data, request), template, request)

    async def approval(self, request: Request) -> Response:
        """A paused run of this template goes on (SPEC §12): `{state, decisions}`, the state
        as the 409 (or the stream) gave it, signed for this key; answered as a run is."""
        template = self._template(request)
        body = await read_json(request, self.playground.config.max_body_bytes)
        data = {"template": template.text, "model": request.query_params.get("model"),
                "state": body.get("state"), "decisions": body.get("decisions")}
        return await self._respond(self.playground.approval_job(data, request), template, request)

    async def _respond(self, job: dict[str, Any], template: Template, request: Request) -> Response:
        protocol = request.query_params.get("protocol")
        if protocol == "ag-ui":
            from .agui import translator

            keys = frozenset(template.schemas["output"]["properties"]["answers"]["properties"])
            streamed: Response = await self.playground._sse_stream(job, translator(template.name, keys))
            return streamed
        if protocol == "vercel-ai":
            from . import vercel

            keys = frozenset(template.schemas["output"]["properties"]["answers"]["properties"])
            ui: Response = await self.playground._sse_stream(job, vercel.translator(keys), vercel.HEADERS)
            return ui
        if "text/event-stream" in request.headers.get("accept", ""):
            events: Response = await self.playground._sse(job)
            return events
        return await self._answer(job, template)

    async def _answer(self, job: dict[str, Any], template: Template) -> Response:
        keys = template.schemas["output"]["properties"]["answers"]["properties"]
        final: dict[str, Any] | None = None
        async for message in self.playground.pool.stream(job):
            kind = message.get("type")
            if kind == "refused":
                return JSONResponse({"error": message["error"]}, status_code=403)
            if kind in ("processing_complete", "processing_error", "diagnostics"):
                final = message
        if final is None or final["type"] != "processing_complete":
            error = (final or {}).get("error") or "the run ended without an answer"
            return JSONResponse({"error": error}, status_code=500)
        if final.get("paused"):  # SPEC §12: a person decides, then /v1/templates/T/approval goes on
            where = f"/v1/templates/{template.name}/approval"
            return JSONResponse({
                "error": f"the run paused for a tool approval: post {{state, decisions}} to {where}",
                "requests": final.get("requests") or [], "state": final.get("state"),
            }, status_code=409)
        usage = final["usage"]
        return JSONResponse({
            "answers": {k: v for k, v in final["result"].items() if k in keys},
            "usage": usage,
            "cost": usage.get("cost"),
            "halted": final.get("halted"),
        })


def body_error(template: Template, body: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) for the first thing wrong with `body`, or None."""
    for error in sorted(template.validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        if error.validator == "required":
            field = next(str(n) for n in error.validator_value if n not in error.instance)
            return field, f"{field!r} is required"
        if error.validator == "additionalProperties":
            allowed = error.schema.get("properties", {})
            field = next(str(n) for n in error.instance if n not in allowed)
            return field, f"{field!r} is not an input of {template.name} (its inputs: {', '.join(allowed) or 'none'})"
        field = "/".join(str(p) for p in error.absolute_path)
        return field, f"{field}: {error.message}"
    return None


def openapi(templates: dict[str, Template]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the served templates."""
    components: dict[str, Any] = {"Error": ERROR_SCHEMA, "Approval": APPROVAL_SCHEMA}
    parameters = [
        {"name": "model", "in": "query", "required": False, "schema": {"type": "string"},
         "description": "a model of the server's allow-list (default: its first)"},
        {"name": "protocol", "in": "query", "required": False, "schema": {"enum": list(PROTOCOLS)},
         "description": "stream AG-UI events or the Vercel AI UI message stream instead of answering once"},
    ]
    paths: dict[str, Any] = {}
    for name, template in templates.items():
        base = template.type
        inp = {k: v for k, v in template.schemas["input"].items() if k != "$schema"}
        out = {k: v for k, v in template.schemas["output"].items() if k not in ("$schema", "$defs")}
        for key, sub in template.schemas["output"].get("$defs", {}).items():
            components[f"{base}__{key}"] = _rebased(sub, base)
        components[f"{base}Input"] = inp
        components[f"{base}Output"] = _rebased(out, base)
        errors = {
            code: {"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
            for code, text in ERRORS.items()
        }
        responses = {
            "200": {"description": "the answers, usage and cost; with Accept: text/event-stream, "
                    "?protocol=ag-ui or ?protocol=vercel-ai, an event stream", "content": {
                        "application/json": {"schema": {"$ref": f"#/components/schemas/{base}Output"}},
                        "text/event-stream": {"schema": {"type": "string"}},
                    }},
            **errors,
        }
        paths[f"/v1/templates/{name}/approval"] = {"post": {
            "operationId": f"approve{base}",
            "summary": f"Continue a paused run of {name}.sd with decisions on its tool calls",
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Approval"}}}},
            "responses": responses,
        }}
        paths[f"/v1/templates/{name}"] = {"post": {
            "operationId": f"run{base}",
            "summary": f"Run {name}.sd",
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{base}Input"}}}},
            "responses": responses,
        }}
    return {
        "openapi": "3.1.0",
        "info": {"title": "struckdown templates", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def _rebased(schema: Any, base: str) -> Any:
    from . import engine

    return engine.rebase(schema, "#/$defs/", f"#/components/schemas/{base}__")
