"""Issue 40 item 13, the playground's rough edges: an upload error names the uploaded file
(never the server's temporary path), a MemoryError says what happened, tool signatures
show types (not `'str'`), and a `module:factory` model is imported again when its file
changes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import SUPPORT, client, run_events, serving

from struckdown.web import WebConfig

TOKEN = "issue40-token"
TOOLS = '''from __future__ import annotations


def lookup(word: str, n: int = 3) -> list[str]:
    """Look a word up."""
    return [word] * n
'''
FACTORY = '''import os

from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel


def make() -> FunctionModel:
    def answer(messages, info):
        return ModelResponse(parts=[TextPart(f"{VERSION} from {os.getpid()}")])

    async def stream(messages, info):
        yield f"{VERSION} from {os.getpid()}"

    return FunctionModel(answer, stream_function=stream)


VERSION = "%s"
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("issue40")
    (root / "tools.py").write_text(TOOLS)
    (root / "reloaded_models.py").write_text(FACTORY % "first")
    return root


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STRUCKDOWN_MODEL", "test")
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), str(SUPPORT), os.environ.get("PYTHONPATH")])))
        config = WebConfig(mode="edit", tokens=(TOKEN,), root=folder, tool_files=((folder / "tools.py").resolve(),))
        with serving(config) as base:
            yield base


def test_an_upload_that_cannot_be_read_is_named_by_its_own_file_name(server: str) -> None:
    body = {"template": "Q {{ n }} [[a]]", "filename": "people.jsonl", "content": '{"n": 1}\n{n: 2}\n', "model": "test"}
    events = run_events(client(server, TOKEN), body, path="/api/batch")
    assert events == [{
        "type": "processing_error", "slot": None,
        "error": "people.jsonl:2: invalid JSON: Expecting property name enclosed in double quotes",
    }]  # fmt: skip


def test_a_memory_error_says_what_happened(server: str) -> None:
    events = run_events(client(server, TOKEN), {"template": "{{ 'x'.ljust(10**10) }} [[a]]", "model": "test"})
    assert events[-1]["type"] == "processing_error"
    assert events[-1]["error"] == (
        "TemplateRuntimeError: rendering failed: MemoryError: out of memory "
        "(the template asked for more memory than this server allows)"
    )


def test_tool_signatures_show_their_types_under_future_annotations(server: str) -> None:
    plan = client(server, TOKEN).post(
        "/api/explain", json={"template": "Look [[a|use_tools=true]]", "tools": "tools.py"}
    ).json()["plan"]
    assert "lookup(word: str, n: int = 3) -> list[str]  Look a word up." in plan
    assert "'str'" not in plan


def test_a_factory_model_is_imported_again_when_its_file_changes(server: str, folder: Path) -> None:
    """One worker runs both jobs (the pid in the answer says so), so the second answer can
    only come from the edited file if the worker imported it again."""
    http = client(server, TOKEN)
    body = {"template": "Say [[a]]", "model": "reloaded_models:make"}
    first = run_events(http, body)[-1]
    assert first["type"] == "processing_complete", first
    version, _, pid = first["slots"]["a"]["output"].partition(" from ")
    assert version == "first"
    (folder / "reloaded_models.py").write_text(FACTORY % "second, edited")
    second = run_events(http, body)[-1]
    assert second["slots"]["a"]["output"] == f"second, edited from {pid}"
    third = run_events(http, body)[-1]  # unchanged since: the same model, no reload
    assert third["slots"]["a"]["output"] == f"second, edited from {pid}"
