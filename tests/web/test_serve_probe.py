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
