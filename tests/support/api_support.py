"""What the `sd serve --api` tests share: a folder of templates, and checks of answers
against the server's own `/openapi.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

REPLY = (
    "Customer {{ customer }} wrote: {{ message }}\n"
    "Is it a complaint? [[bool:complaint]]\n"
    "How many items? [[int:count]]\n"
    "Answer them. [[reply]]\n"
)
GREET = "Greet {{ name }}. [[greeting|use_tools=true]]\n"
TOOLS = (
    "def lookup(word: str) -> str:\n"
    "    \"\"\"Look a word up.\"\"\"\n"
    "    return f'{word} wrote the first program'\n"
)
APPROVE = "Greet {{ name }}. [[greeting|use_tools=true, approve=lookup]]\n"  # pauses for a person
RULE = "When does {{ event }} repeat? [[date_rule:when]]\n"  # its type has a definition of its own ($defs)
BODY = {"customer": "Ada", "message": "The parcel came late."}
ANSWERS = {"complaint": True, "count": 42, "reply": "A short poem for Ada."}


def template_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "reply.sd").write_text(REPLY)
    (folder / "greet.sd").write_text(GREET)
    (folder / "rule.sd").write_text(RULE)
    (folder / "approve.sd").write_text(APPROVE)
    (tmp_path / "tools.py").write_text(TOOLS)
    return folder


def check_against(document: dict[str, Any], path: str, status: int, body: Any) -> None:
    """`body` is what `document` (an OpenAPI 3.1 description) says POST `path` answers with `status`."""
    response = document["paths"][path]["post"]["responses"][str(status)]
    schema = response["content"]["application/json"]["schema"]
    root = {**document, "$ref": schema["$ref"]}  # `#/components/...` resolves inside the document
    Draft202012Validator(root).validate(body)


def sse_data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


def refs(schema: Any) -> list[str]:
    """Every `$ref` in `schema`, depth first."""
    if isinstance(schema, dict):
        own = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
        return own + [r for v in schema.values() for r in refs(v)]
    if isinstance(schema, list):
        return [r for v in schema for r in refs(v)]
    return []


def vercel_chunks(text: str) -> list[Any]:
    """A Vercel AI UI message stream read with pydantic-ai's models of its chunks (the
    `[DONE]` line as `None`); a chunk none of them takes fails the test."""
    from pydantic import BaseModel, TypeAdapter
    from pydantic_ai.ui.vercel_ai import response_types as v

    kinds = [c for c in vars(v).values() if isinstance(c, type) and issubclass(c, v.BaseChunk) and c is not v.BaseChunk]
    typed = {c.model_fields["type"].default: c for c in kinds if c is not v.DataChunk and c is not v.DoneChunk}
    out: list[Any] = []
    for line in text.splitlines():
        if not line.startswith("data: "):
            continue
        raw = line[len("data: "):]
        if raw == "[DONE]":
            out.append(None)
            continue
        data = json.loads(raw)
        model: type[BaseModel] = v.DataChunk if data["type"].startswith("data-") else typed[data["type"]]
        chunk = TypeAdapter(model).validate_python(data)
        assert json.loads(chunk.encode(6)) == data  # nothing in it the model does not know
        out.append(chunk)
    return out
