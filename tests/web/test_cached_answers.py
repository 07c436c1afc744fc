"""Issue 40 item 9 in the playground: answers served by the response cache say so, in a
run's events and results and in a batch's rows and status."""

from __future__ import annotations

from pathlib import Path

import pytest

from struckdown.web import WebConfig
from web_support import client, run_events, serving, use_scripted_model

TOKEN = "cache-token"


def test_the_playground_says_which_answers_came_from_the_cache(tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as patch:
        use_scripted_model(patch)
        patch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))
        with serving(WebConfig(mode="edit", tokens=(TOKEN,), root=tmp_path)) as base:
            http = client(base, TOKEN)
            run = {"template": "Friendly? [[bool:friendly]]", "path": "t.sd", "cache": True}
            first, second = run_events(http, run), run_events(http, run)
            batch = {"template": "Greet {{ name }}. [[bool:friendly]]", "filename": "people.csv",
                     "content": "name\nAda\nLin\n", "jobs": 2, "cache": True}
            fresh, cached = run_events(http, batch, path="/api/batch"), run_events(http, batch, path="/api/batch")

    def completed(events: list[dict]) -> list[bool]:  # type: ignore[type-arg]
        return [e["was_cached"] for e in events if e["type"] == "slot_completed"]

    assert (completed(first), completed(second)) == ([False], [True])
    assert second[-1]["slots"]["friendly"]["cached"] is True  # what the usage line counts
    assert [e["cached"] for e in fresh if e["type"] == "batch_row"] == [0, 0]
    assert [e["cached"] for e in cached if e["type"] == "batch_row"] == [1, 1]
    assert (fresh[-1]["type"], fresh[-1]["cached"], cached[-1]["cached"]) == ("batch_complete", 0, 2)
