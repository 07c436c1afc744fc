"""genai-prices' data is not loaded for a run of the test model, and prices are never
hidden by that (struckdown/models/deferred_prices.py, SPEC §28)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from genai_prices import calc_price, data_snapshot
from genai_prices.data import providers as bundled_providers
from genai_prices.data_snapshot import DataSnapshot
from pydantic_ai.usage import RequestUsage

from struckdown.models.deferred_prices import UNPRICED, DeferredSnapshot, defer

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def installed() -> Iterator[None]:
    """Whatever the test installs is undone."""
    before = data_snapshot._custom_snapshot
    try:
        yield
    finally:
        data_snapshot.set_custom_snapshot(before)


def real() -> DataSnapshot:
    return DataSnapshot(providers=bundled_providers, from_auto_update=False)


@pytest.mark.parametrize("provider", sorted(UNPRICED))
def test_the_unpriced_providers_are_unknown_to_the_data_in_the_same_words(provider: str) -> None:
    with pytest.raises(LookupError) as known:
        real().find_provider_model("test", None, provider, None)
    with pytest.raises(LookupError) as deferred:
        DeferredSnapshot().find_provider_model("test", None, provider, None)
    assert str(deferred.value) == str(known.value) == f"Unable to find provider provider_id={provider!r}"


@pytest.mark.parametrize(
    ("model", "reference"),
    [
        ("gpt-4o-mini", {"provider_id": "openai"}),
        ("claude-sonnet-4-5", {"provider_id": "anthropic"}),
        ("gpt-4o", {"provider_api_url": "https://api.openai.com/v1"}),
        ("gpt-4o", {}),
    ],
)
def test_a_deferred_snapshot_prices_as_the_data_does(model: str, reference: dict[str, str], installed: None) -> None:
    usage = RequestUsage(input_tokens=1000, output_tokens=200)
    data_snapshot.set_custom_snapshot(real())
    expected = calc_price(usage, model, genai_request_timestamp=WHEN, **reference).total_price  # type: ignore[call-overload]
    data_snapshot.set_custom_snapshot(DeferredSnapshot())
    assert calc_price(usage, model, genai_request_timestamp=WHEN, **reference).total_price == expected > 0  # type: ignore[call-overload]


def test_the_deferred_snapshot_steps_aside_once_its_data_is_read(installed: None) -> None:
    deferred = DeferredSnapshot()
    data_snapshot.set_custom_snapshot(deferred)
    assert data_snapshot.get_snapshot() is deferred
    assert deferred.providers is bundled_providers
    assert data_snapshot._custom_snapshot is None  # genai-prices' own bundled snapshot from now on
    assert data_snapshot.get_snapshot().providers is bundled_providers


def test_defer_leaves_an_installed_snapshot_alone_and_does_nothing_once_the_data_is_loaded(installed: None) -> None:
    mine = real()
    data_snapshot.set_custom_snapshot(mine)
    defer()
    assert data_snapshot._custom_snapshot is mine
    data_snapshot.set_custom_snapshot(None)
    defer()  # genai_prices.data is loaded in this process (imported above)
    assert data_snapshot._custom_snapshot is None


PROBE = """
import json, sys
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage
import struckdown as sd

if sys.argv[1] == "loaded":
    import genai_prices.data
dry = sd.complete("Say hi [[greeting]] and pick [[pick:colour|red,green]] [[int:n]]", model="test", cache=False)
loaded_after_dry_run = "genai_prices.data" in sys.modules
from struckdown.models import resolve_model
from struckdown.models.store import ModelStore
window = resolve_model("test", ModelStore()).profile.get("context_window")

def answer(messages, info):
    return ModelResponse(parts=[TextPart("x")], model_name="gpt-4o-mini", provider_name="openai",
                         usage=RequestUsage(input_tokens=1000, output_tokens=200))

priced = sd.complete("A [[a]]", model=FunctionModel(answer, model_name="gpt-4o-mini"), cache=False)
from pydantic_ai._genai_prices import lookup_context_window
print(json.dumps({"dry": dry.to_dict(), "dry_usage": dry.usage.to_dict(), "window": window,
                  "loaded_after_dry_run": loaded_after_dry_run, "cost": priced.usage.cost,
                  "real_window": lookup_context_window("gpt-4o-mini", provider_name="openai")}))
"""


def probe(mode: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.process
def test_a_dry_run_loads_no_price_data_and_a_priced_model_after_it_gets_its_price() -> None:
    deferred, loaded = probe("deferred"), probe("loaded")
    assert deferred["loaded_after_dry_run"] is False and loaded["loaded_after_dry_run"] is True
    assert deferred["dry"] == loaded["dry"] == {"greeting": "success (no tool calls)", "colour": "red", "n": 0}
    assert deferred["dry_usage"] == loaded["dry_usage"]
    assert deferred["window"] is None and loaded["window"] is None
    usage = RequestUsage(input_tokens=1000, output_tokens=200)
    expected = float(calc_price(usage, "gpt-4o-mini", provider_id="openai").total_price)
    assert deferred["cost"] == loaded["cost"] == pytest.approx(expected) and expected > 0
    window = deferred["real_window"]
    assert window == loaded["real_window"] and isinstance(window, int) and window > 0  # a known model's context
