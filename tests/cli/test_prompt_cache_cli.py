"""The CLI's prompt-cache line (SPEC §24): `sd run` and `sd batch` say how much input the
provider's cache served and what it saved; `-o` records the cache tokens."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import plain_environment, sd, use_model  # noqa: F401
from provider_wire import Wire

# 55 USD per million input tokens, 5 for a cache read: 8,200 read tokens save exactly $0.41
PRICES = {"claude-sonnet-4-5": {"input": 55, "output": 15, "cache_read": 5}}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    template = tmp_path / "t.sd"
    template.write_text("<system>You are terse.</system>\nSummarise {{ text }}. [[summary]]\n")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "one"}\n{"text": "two"}\n')
    return {"template": template, "prices": prices, "rows": rows, "dir": tmp_path}


def test_run_summary_says_how_much_input_the_cache_served_and_saved(files: dict[str, Path], use_model: Any) -> None:
    use_model(Wire(input_tokens=10_000, cached=8_200).anthropic())
    out = files["dir"] / "out.json"
    result = sd("run", files["template"], "--set", "text=tea", "--prices", files["prices"], "-o", out)
    assert result.exit_code == 0, result.output
    assert "· cache: 82 % of input read from the provider cache, $0.41 saved ·" in result.stdout
    usage = json.loads(out.read_text())["usage"]
    assert (usage["input_tokens"], usage["cache_read_tokens"], usage["cache_write_tokens"]) == (10_000, 8_200, 0)
    assert usage["cache_saved"] == pytest.approx(0.41)


def test_run_without_cache_tokens_has_no_cache_part(files: dict[str, Path], use_model: Any) -> None:
    use_model(Wire(input_tokens=10_000, cached=0).anthropic())
    result = sd("run", files["template"], "--set", "text=tea", "--prices", files["prices"])
    assert result.exit_code == 0, result.output
    assert "done · " in result.stdout and "cache:" not in result.output


def test_batch_summary_adds_up_the_rows(files: dict[str, Path], use_model: Any) -> None:
    use_model(Wire(input_tokens=10_000, cached=8_200).anthropic())
    out = files["dir"] / "out.jsonl"
    result = sd("batch", files["template"], files["rows"], "-o", out, "--prices", files["prices"])
    assert result.exit_code == 0, result.output
    assert re.search(
        r"^batch: 2 rows → .*out\.jsonl: 2 ok · 2 requests · 20,004 tokens · \$\S+ · "
        r"cache: 82 % of input read from the provider cache, \$0\.82 saved · [\d.]+ s$",
        result.stderr, re.M,
    ), result.stderr


def test_no_prompt_cache_flag_sends_no_cache_field(files: dict[str, Path], use_model: Any) -> None:
    wire = Wire()
    use_model(wire.llama_cpp())
    assert sd("run", files["template"], "--set", "text=tea").exit_code == 0
    assert sd("run", files["template"], "--set", "text=tea", "--no-prompt-cache", "--no-cache").exit_code == 0
    assert [b.get("cache_prompt") for b in wire.bodies] == [True, None]
