"""`sd serve` (issue 47, SPEC §30): one API key cannot probe another's prompts through the
provider's prompt cache. The cache key of a request includes the asking key's id, and no
usage a key receives says how many input tokens the provider's cache already held."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web_support import client, run_events, serving, use_scripted_model

from struckdown.web import WebConfig
from struckdown.web.pool import PoolLimits

TEMPLATE = "The shared prefix of a long prompt. [[a]]"


def _bodies(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _has_cache_counts(value: object) -> bool:
    if isinstance(value, dict):
        return any(k.startswith("cache_") or _has_cache_counts(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_cache_counts(v) for v in value)
    return False


def test_prompt_cache_keys_are_per_api_key_and_cache_counts_are_not_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    use_scripted_model(monkeypatch, "web_models:openai_wire")
    bodies = tmp_path / "bodies.jsonl"
    monkeypatch.setenv("SD_TEST_BODIES", str(bodies))
    config = WebConfig(mode="serve", tokens=("alice-key", "bob-key"), limits=PoolLimits(workers=1, time_limit_s=20.0))
    with serving(config) as base:
        alice = run_events(client(base, "alice-key"), {"template": TEMPLATE})
        alice_again = run_events(client(base, "alice-key"), {"template": TEMPLATE})
        bob = run_events(client(base, "bob-key"), {"template": TEMPLATE})

    keys = [body["prompt_cache_key"] for body in _bodies(bodies)]
    assert len(keys) == 3
    assert keys[0] == keys[1]  # the same key's requests share the provider's cache
    assert keys[2] != keys[0]  # another key's never do
    assert all(str(k).startswith("sd-") and "-t" in str(k) for k in keys)
    for events in (alice, alice_again, bob):
        assert events[-1]["type"] == "processing_complete"
        assert events[-1]["result"] == {"a": "ok"}
        assert events[-1]["usage"]["input_tokens"] == 1000
        assert not any(_has_cache_counts(event) for event in events)  # 600 were cached: nobody is told
