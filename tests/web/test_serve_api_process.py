"""`sd serve --api DIR` as a real process, called with a real HTTP client (SPEC §36):
every answer validates against the `/openapi.json` it serves, a bad body is 422 naming its
field, and the key and allow-list rules hold."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from api_support import ANSWERS, BODY, check_against, sse_data, template_folder
from web_support import scripted_model_env

pytestmark = pytest.mark.process

KEY = "secret-team-key-9c1d"


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    folder = template_folder(tmp_path)
    keys = tmp_path / "keys"
    keys.write_text(f"# the team\n{KEY}\n")
    env = {**os.environ, **scripted_model_env()}
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", "serve", "--api", str(folder), "--api-key-file", str(keys),
         "--tools", str(tmp_path / "tools.py"), "--port", "0", "--workers", "1", "--rate", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once the socket listens
        assert first.startswith("struckdown playground (serve) on http://127.0.0.1:"), first
        second = process.stdout.readline()
        url = first.split(" on ")[1].strip().rstrip("/")
        assert second == f"templates of {folder.resolve()} at {url}/v1/templates/NAME; docs on {url}/docs\n"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def client(base: str, key: str = KEY) -> httpx2.Client:
    return httpx2.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_every_answer_validates_against_the_served_openapi(base: str) -> None:
    with client(base) as http:
        document = http.get("/openapi.json").json()
        ok = http.post("/v1/templates/reply", json=BODY)
        assert ok.status_code == 200, ok.text
        check_against(document, "/v1/templates/reply", 200, ok.json())
        assert ok.json()["answers"] == ANSWERS
        bad = http.post("/v1/templates/reply", json={"customer": "Ada", "message": ["not", "text"]})
        assert bad.status_code == 422
        assert bad.json()["field"] == "message"
        check_against(document, "/v1/templates/reply", 422, bad.json())
        missing = http.post("/v1/templates/greet", json={})
        assert (missing.status_code, missing.json()) == (422, {"error": "'name' is required", "field": "name"})
        refused = http.post("/v1/templates/greet?model=openai:gpt-4o", json={"name": "Ada"})
        assert refused.status_code == 403
        check_against(document, "/v1/templates/greet", 403, refused.json())
        streamed = http.post("/v1/templates/reply", json=BODY, headers={"Accept": "text/event-stream"})
        assert sse_data(streamed.text)[-1]["result"] == ANSWERS
        # --rate 5: each call is a run, checked or not; the sixth this minute waits
        over = http.post("/v1/templates/reply", json=BODY)
        assert (over.status_code, over.headers["retry-after"]) == (429, "60")
        assert over.json() == {"error": "more than 5 runs a minute with this key"}
        check_against(document, "/v1/templates/reply", 429, over.json())


def test_a_request_without_the_key_is_refused(base: str) -> None:
    with client(base, "guess") as http:
        for answer in (http.post("/v1/templates/reply", json=BODY), http.get("/openapi.json"), http.get("/docs")):
            assert answer.status_code == 401


def test_ag_ui_over_the_wire(base: str) -> None:
    from ag_ui.core import Event, EventType
    from pydantic import TypeAdapter

    adapter: TypeAdapter[object] = TypeAdapter(Event)
    with client(base) as http:
        answer = http.post("/v1/templates/reply?protocol=ag-ui", json=BODY)
    events = [adapter.validate_python(raw) for raw in sse_data(answer.text)]
    assert events[0].type == EventType.RUN_STARTED  # type: ignore[attr-defined]
    assert events[-1].type == EventType.RUN_FINISHED  # type: ignore[attr-defined]
    assert events[-1].result["answers"] == ANSWERS  # type: ignore[attr-defined]
