"""SPEC §33's property: over random contexts with private values and random templates that
read them (directly, through earlier answers, or through unlabelled values holding a copy),
a remote model (a fake OpenAI-compatible server on 127.0.0.1 counted remote) receives 0
bytes of any private value. Seeded; the README run draws a quarter of the cases."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import struckdown as sd
from depth import cases
from fake_openai import FakeOpenAI

KEYS = ("a", "b", "c", "d")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(lambda body: "ok")
    with fake.serving() as base:
        yield fake, base


def _templates(count: int) -> list[str]:
    """Templates of one to three slots reading context names and earlier answers, some split by
    checkpoints: a fixed list (seeded), so each is parsed once and the cases vary the contexts."""
    rng = random.Random(33)
    out = []
    for _ in range(count):
        lines = []
        for index in range(rng.randint(1, 3)):
            names = [*KEYS, *(f"s{i}" for i in range(index))]
            reads = rng.sample(names, rng.randint(1, 2))
            lines.append(" ".join(f"{{{{ {name} }}}}" for name in reads) + f" [[s{index}]]")
            if rng.random() < 0.5:
                lines.append("<checkpoint>")
        out.append("\n".join(lines))
    return out


TEMPLATES = _templates(40)


@st.composite
def runs(draw: Any) -> tuple[str, dict[str, Any], list[str], list[str]]:
    """(template, context, the names passed as private=, every private text)."""
    secrets = {k: f"S{i}-" + draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789@.", min_size=4, max_size=12))
               for i, k in enumerate(KEYS)}
    private = draw(st.lists(st.sampled_from(KEYS), unique=True, min_size=1, max_size=3))
    by_name = draw(st.lists(st.sampled_from(private), unique=True)) if private else []
    context: dict[str, Any] = {}
    for key in KEYS:
        if key in private and key not in by_name:
            context[key] = sd.Private(secrets[key])
        elif key in private:
            context[key] = secrets[key]
        elif private and draw(st.booleans()):  # an unlabelled copy of a private value
            context[key] = f"note: {secrets[draw(st.sampled_from(private))]}"
        else:
            context[key] = secrets[key]
    template = draw(st.sampled_from(TEMPLATES))
    texts = [secrets[k] for k in private]
    return template, context, by_name, texts


@settings(max_examples=cases(400), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(run=runs())
def test_no_byte_of_a_private_value_reaches_a_remote_model(server: tuple[FakeOpenAI, str], run: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    fake, base = server
    template, context, by_name, texts = run
    monkeypatch.setenv("LLM_API_BASE", base)
    monkeypatch.setenv("LLM_API_KEY", "k")
    monkeypatch.setenv("STRUCKDOWN_MAX_RETRIES", "0")
    before = len(fake.bodies)
    try:
        sd.complete(template, context, model="served", private=by_name, remote_models=[base], cache=False)
    except sd.FlowError:
        pass
    sent = "\n".join(json.dumps(body, ensure_ascii=False) for body in fake.bodies[before:])
    assert not [text for text in texts if text in sent]
