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
RULE = "When does {{ event }} repeat? [[date_rule:when]]\n"  # its type has a definition of its own ($defs)
BODY = {"customer": "Ada", "message": "The parcel came late."}
ANSWERS = {"complaint": True, "count": 42, "reply": "A short poem for Ada."}


def template_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "reply.sd").write_text(REPLY)
    (folder / "greet.sd").write_text(GREET)
    (folder / "rule.sd").write_text(RULE)
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
