"""`sd explain --cache` (SPEC §24): per slot the cacheable prefix, the first row value that
breaks it (with its line:col), the predicted cached share and the saving; the prediction
checked against what a provider that caches by its own rule reports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import plain_environment, sd  # noqa: F401
from provider_wire import Wire

import struckdown as sd_lib

SYSTEM_ID = (
    "<system>You are ACME's support assistant for customer {{ customer_id }}. Follow the policy below.</system>\n"
    "Policy: be brief. Message: {{ message }}\n\nSummarise it. [[summary]]\n\nNow the reply. [[reply]]\n\n"
    "And the tone. [[pick:tone|calm, angry]]\n"
)
PREAMBLE = "Policy line: answer the customer politely and check the order first. " * 170  # ~3,000 tokens


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def rows_file(path: Path, rows: list[dict[str, Any]]) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


def predicted(output: str) -> float:
    match = re.search(r"^predicted: (\d+) % of [\d,]+ input tokens read from the cache", output, re.M)
    assert match, output
    return int(match.group(1)) / 100


def test_the_value_in_the_system_text_that_breaks_the_prefix_is_named_with_its_place(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", SYSTEM_ID)
    rows = rows_file(tmp_path / "rows.jsonl", [{"customer_id": f"C{i}", "message": f"m{i}"} for i in range(3)])
    result = sd("explain", template, "--cache", "--rows", rows, "--model", "anthropic:claude-sonnet-4-5")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "prompt cache: 3 rows, Anthropic breakpoints; tokens estimated at 4 characters each"
    assert [line.split()[0] for line in lines[1:4]] == ["summary", "reply", "tone"]
    assert all(re.search(r"cacheable prefix [\d,]+ tokens · predicted cached \d+ % of [\d,]+ input tokens$", line)
               for line in lines[1:4])
    # the fixed text after it before the first slot: ". Follow the policy below.</system>\nPolicy: be brief.
    # Message: \n\nSummarise it." less the expression, 80 characters
    assert lines[4] == "  {{ customer_id }} at 1:55 breaks 20 cacheable tokens for 3 slots"
    assert re.match(r"predicted: \d+ % .*; input \$[\d.]+ with caching vs \$[\d.]+ without \(\$[\d.]+ saved\) "
                    r"at claude-sonnet-4-5 prices$", lines[5])


def test_without_a_price_the_saving_is_unknown_and_the_flags_need_cache(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", SYSTEM_ID)
    result = sd("explain", template, "--cache")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("prompt cache: 1 row, shared prefixes of 1,024+ tokens")
    assert result.stdout.endswith("saving unknown (give --model provider:name or --prices FILE)\n")
    bad = sd("explain", template, "--rows", tmp_path / "rows.jsonl")
    assert bad.exit_code == 2 and "--rows, --model and --prices go with --cache" in bad.output


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_prediction_is_within_15_points_of_what_the_provider_reports(tmp_path: Path, provider: str) -> None:
    """A fixed ~3,000-token preamble, the row's value after it, 4 slots × 6 rows (bench case q runs 5 × 200); the provider
    (the mock transport) reports cached tokens by its own rule from the bodies it receives."""
    template_text = (
        f"<system>{PREAMBLE}</system>\nCustomer {{{{ customer_id }}}} writes: {{{{ message }}}}\n\n"
        "Summarise it. [[summary]]\n\nThe reply. [[reply]]\n\nThe next step. [[step]]\n\nThe tone. [[tone]]\n"
    )
    rows = [{"customer_id": f"C{i}", "message": f"my order {i} is late"} for i in range(6)]
    wire = Wire(rule="anthropic" if provider == "anthropic" else "prefix")
    model = wire.anthropic() if provider == "anthropic" else wire.openai()
    prices = {"claude-sonnet-4-5": {"input": 3, "output": 15, "cache_read": 0.3},
              "gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25}}
    results = sd_lib.complete_batch(template_text, rows, model=model, concurrency=1, prices=prices)
    usage = sum((r.usage for r in results), sd_lib.Usage())
    reported = usage.cache_read_tokens / usage.input_tokens
    template = write(tmp_path / "t.sd", template_text)
    name = "anthropic:claude-sonnet-4-5" if provider == "anthropic" else "openai:gpt-4o"
    price_file = write(tmp_path / "prices.json", json.dumps(prices))
    result = sd("explain", template, "--cache", "--rows", rows_file(tmp_path / "rows.jsonl", rows), "--model", name,
                "--prices", price_file)
    assert result.exit_code == 0, result.output
    assert reported > 0.5
    assert abs(predicted(result.stdout) - reported) <= 0.15, (predicted(result.stdout), reported)
    if provider == "anthropic":  # caching costs at most 0.35× of the same input uncached
        with_cache, without = map(float, re.search(r"input \$([\d.]+) with caching vs \$([\d.]+) without",
                                                   result.stdout).groups())
        assert with_cache <= 0.35 * without
        assert usage.cost is not None and usage.cache_saved is not None
        assert usage.cost <= 0.35 * (usage.cost + usage.cache_saved)
