"""`sd serve`, issue 47's fourth probe: what a key holder could make the server do with
hostile option values, each refused before any model call."""

from __future__ import annotations

import pytest
from web_support import client, run_events, serving, use_scripted_model

from struckdown.web import WebConfig
from struckdown.web.pool import PoolLimits

KEY = "team-key"


def config() -> WebConfig:
    return WebConfig(mode="serve", tokens=(KEY,), models=("test",), limits=PoolLimits(workers=1, time_limit_s=20.0))


def test_a_vote_cannot_multiply_one_slot_into_thousands_of_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    use_scripted_model(monkeypatch)
    with serving(config()) as base:
        events = run_events(client(base, KEY), {"template": "Which?\n[[pick:p|x, y, confidence=vote:5000]]",
                                                "model": "test"})
    assert [e["type"] for e in events] == ["run_started", "processing_error"]
    assert events[-1]["error"].startswith(
        "template.sd:2:27: slot 'p': confidence=vote:5000 asks 5,000 times, more than the slot's request limit of 20"
    )


def test_an_error_names_no_folder_of_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's error named the worker's temporary folder (`/tmp/sd-worker-…/cwd-…/template.sd`):
    the page sends template text, and the server's paths are none of its business."""
    use_scripted_model(monkeypatch)
    with serving(config()) as base:
        events = run_events(client(base, KEY), {"template": "Hi\n[[a|tool_choice=nope, use_tools=true]]", "model": "test"})
    error = events[-1]["error"]
    assert events[-1]["type"] == "processing_error"
    assert error.startswith("template.sd:2:"), error
    assert "/tmp" not in error and "sd-worker" not in error


def test_a_batch_may_not_hold_more_rows_than_the_key_may_run_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch counted as one run against the key's rate (120 a minute), whatever its rows:
    one request of 100,000 rows ran as many, on the operator's keys."""
    use_scripted_model(monkeypatch)
    limited = WebConfig(mode="serve", tokens=(KEY,), models=("test",), rate_per_minute=3,
                        limits=PoolLimits(workers=1, time_limit_s=20.0))
    rows = "".join(f'{{"name": "n{i}"}}\n' for i in range(4))
    with serving(limited) as base:
        http = client(base, KEY)
        refused = http.post("/api/batch", json={"template": "Hi {{ name }} [[a]]", "filename": "rows.jsonl",
                                                "content": rows, "model": "test"})
        fine = run_events(http, {"template": "Hi {{ name }} [[a]]", "filename": "rows.jsonl",
                                 "content": rows[: rows.index("\n") + 1] * 3, "model": "test"}, "/api/batch")
    assert refused.status_code == 403
    assert refused.json() == {"error": "the upload holds 4 rows; this server runs at most 3 rows a batch "
                                       "(the runs one API key may start a minute)"}
    assert fine[-1]["type"] == "batch_complete" and fine[-1]["total"] == 3
