"""`sd serve`: every model a template can reach is on the allow-list (issue 39 N1).

The attack: a template's own `model=` (or `fallback=`) option named a model the server's
`--models` did not list, so any importable `module:factory` ran in the worker and any
provider was reached with the operator's keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import client, run_events, serving, use_scripted_model

from cli_support import sd
from struckdown.web import WebConfig
from struckdown.web.pool import PoolLimits

KEY = "team-key"


def config(**changes: object) -> WebConfig:
    base: dict[str, object] = {
        "mode": "serve", "tokens": (KEY,), "models": ("test",), "limits": PoolLimits(workers=1, time_limit_s=20.0),
    }
    base.update(changes)
    return WebConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Where the `web_models:marker` factory writes when it runs (it must not)."""
    use_scripted_model(monkeypatch)
    path = tmp_path / "factory-ran"
    monkeypatch.setenv("SD_TEST_MARKER", str(path))
    yield path


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("Hi [[a|model=web_models:marker]]",
         "slot 'a': model=: model 'web_models:marker' is not allowed here; allowed: test"),
        ('Hi [[a]] [[b|fallback="test, web_models:marker"]]',
         "slot 'b': fallback=: model 'web_models:marker' is not allowed here; allowed: test"),
        ('Hi [[a|fallback="openai:gpt-4o"]]',
         "slot 'a': fallback=: model 'openai:gpt-4o' is not allowed here; allowed: test"),
        ("Hi [[bool:stop|model=web_models:marker]]",
         "slot 'stop': model=: model 'web_models:marker' is not allowed here; allowed: test"),
        ('Hi [[halt:g|model="web_models:marker"]] [[a]]',
         "slot 'g': model=: model 'web_models:marker' is not allowed here; allowed: test"),
        ("Hi [[a|model={{ m }}]]",
         "slot 'a': model= is computed with {{ … }}, which this server does not allow: name the model"),
        # issue 47 (high): escalate= was never checked: a factory ran in the worker, a provider was reached
        ('Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate="web_models:marker"]]',
         "slot 'p': escalate=: model 'web_models:marker' is not allowed here; allowed: test"),
        ('Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate="tempfile:mkdtemp"]]',
         "slot 'p': escalate=: model 'tempfile:mkdtemp' is not allowed here; allowed: test"),
        ('Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate="openai:gpt-4o"]]',
         "slot 'p': escalate=: model 'openai:gpt-4o' is not allowed here; allowed: test"),
        ("Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate={{ m }}]]",
         "slot 'p': escalate= is computed with {{ … }}, which this server does not allow: name the model"),
    ],
)
def test_a_model_the_template_names_must_be_on_the_allow_list(marker: Path, template: str, error: str) -> None:
    with serving(config()) as base:
        http = client(base, KEY)
        for path in ("/api/run", "/api/batch"):
            body = {"template": template, "model": "test", "context": '{"m": "web_models:marker"}',
                    "content": '{"m": "web_models:marker"}\n', "filename": "rows.jsonl"}
            response = http.post(path, json=body)
            assert response.status_code == 403, response.text
            assert response.json() == {"error": error}
    assert not marker.exists()


def test_without_an_allow_list_a_template_cannot_name_any_model(marker: Path) -> None:
    with serving(config(models=())) as base:
        response = client(base, KEY).post("/api/run", json={"template": "Hi [[a|model=web_models:marker]]"})
    assert response.status_code == 403
    assert response.json() == {
        "error": "slot 'a': model=: model 'web_models:marker' is not allowed here: this server uses its default model only"
    }
    assert not marker.exists()


def test_a_listed_factory_runs_only_with_allow_factories(marker: Path) -> None:
    template = "Hi [[a|model=web_models:marker]]"
    with serving(config(models=("test", "web_models:marker"))) as base:
        refused = client(base, KEY).post("/api/run", json={"template": template})
        assert refused.status_code == 403
        assert refused.json() == {"error": "slot 'a': model=: model 'web_models:marker' is a module:factory name, "
                                           "which this server runs only with --allow-factories"}
        picked = client(base, KEY).post("/api/run", json={"template": "Hi [[a]]", "model": "web_models:marker"})
        assert picked.status_code == 403
    assert not marker.exists()
    with serving(config(models=("test", "web_models:marker"), allow_factories=True)) as base:
        events = run_events(client(base, KEY), {"template": template})
    assert events[-1]["result"] == {"a": "A short poem for Ada."}
    assert marker.read_text() == "factory ran\n"


def test_a_listed_escalate_model_runs_and_a_listed_factory_needs_allow_factories(marker: Path) -> None:
    """escalate= follows the same rules as model=: a listed name runs, a listed factory
    only with --allow-factories."""
    template = 'Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate="test"]]'
    with serving(config(models=("test",))) as base:
        events = run_events(client(base, KEY), {"template": template, "model": "test"})
    assert events[-1]["type"] == "processing_complete"  # a listed escalate model still runs
    assert not marker.exists()
    with serving(config(models=("test", "web_models:marker"))) as base:
        refused = client(base, KEY).post("/api/run", json={"template": template.replace('"test"', '"web_models:marker"')})
    assert refused.status_code == 403
    assert refused.json() == {"error": "slot 'p': escalate=: model 'web_models:marker' is a module:factory name, "
                                       "which this server runs only with --allow-factories"}
    assert not marker.exists()


def test_listed_models_in_template_options_still_run(marker: Path) -> None:
    with serving(config(models=("test", "openai:gpt-4o"))) as base:
        events = run_events(client(base, KEY), {"template": 'Hi [[a|model=test, fallback="openai:gpt-4o"]]'})
    assert events[-1]["type"] == "processing_complete"
    assert events[-1]["result"] == {"a": "success (no tool calls)"}


def test_serve_refuses_a_factory_in_models_without_allow_factories(tmp_path: Path) -> None:
    result = sd("serve", "--api-key-file", _keyfile(tmp_path), "--models", "test,tempfile:mkdtemp", "--port", "0")
    assert result.exit_code == 2
    assert ("--models tempfile:mkdtemp: a module:factory name runs Python in the workers; "
            "pass --allow-factories to serve it") in result.output


def _keyfile(tmp_path: Path) -> Path:
    path = tmp_path / "keys"
    path.write_text("# the team's key\nteam-key\n")
    return path


def test_the_check_shows_a_refused_model_at_its_option(marker: Path) -> None:
    with serving(config()) as base:
        http = client(base, KEY)
        found = http.post("/api/check", json={"template": "Hi\n[[a|model=test]] [[b|fallback=\"openai:gpt-4o\"]]"})
        fine = http.post("/api/check", json={"template": "Hi [[a|model=test]]"})
    assert found.json()["diagnostics"] == [{
        "line": 2, "column": 31, "severity": "error", "hint": None,  # the quote that opens the value
        "message": "slot 'b': fallback=: model 'openai:gpt-4o' is not allowed here; allowed: test",
    }]
    assert fine.json()["diagnostics"] == []
    assert not marker.exists()
