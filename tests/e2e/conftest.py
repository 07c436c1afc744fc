"""End-to-end tests against a real local model server (scripts/local-llm.sh).

They run with `pytest -m e2e` after `scripts/local-llm.sh start` (.ci/run does both).
They fail — never skip — when the server is not there: an e2e run that tested
nothing must not look green.
"""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

DEFAULT_BASE = "http://127.0.0.1:8765/v1"


@pytest.fixture(scope="session")
def base_url() -> str:
    base = os.environ.get("LLM_API_BASE", DEFAULT_BASE).rstrip("/")
    health = base.removesuffix("/v1") + "/health"
    try:
        with urllib.request.urlopen(health, timeout=10) as response:
            assert response.status == 200, f"{health} answered {response.status}"
    except OSError as exc:
        pytest.fail(f"no local model server at {base} ({exc}); start it with scripts/local-llm.sh start")
    return base


@pytest.fixture(scope="session")
def model(base_url: str):  # type: ignore[no-untyped-def]
    from struckdown.models import openai_compatible

    return openai_compatible("qwen2.5-coder-0.5b-instruct", base_url, os.environ.get("LLM_API_KEY"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


def dumps(value: object) -> str:
    return json.dumps(value, default=str)
