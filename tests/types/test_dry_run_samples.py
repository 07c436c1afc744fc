"""SPEC §22: `model="test"` / `sd run --model test` is a dry run for EVERY builtin type.

pydantic-ai's TestModel wrote `"a"` into every string, so `time`, `datetime`, `duration`,
bounded dates and `pattern=` slots failed with BadModelOutput. The table below has rows
for every name of the builtin type registry (a new builtin without a row fails
`test_every_builtin_type_has_dry_run_rows`), with the options that constrain it: bounds,
patterns with lengths, choices, quantifiers, `!`. Each row's exact sample is pinned."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from cli_support import plain_environment, sd as sd_cli  # noqa: F401
from struckdown.codec import jsonable
from struckdown.types import BUILTIN_TYPES
from struckdown.types.samples import text_matching

UTC2 = dt.timezone(dt.timedelta(hours=2))
TEXT = "success (no tool calls)"  # TestModel's free-text answer, kept
RULE = {"freq": "YEARLY", "dtstart": None, "count": None, "until": None, "interval": 1, "byweekday": None,
        "bymonth": None, "bymonthday": None, "bysetpos": None}  # fmt: skip

#: type name -> [(slot, the dry run's answer)]
DRY_RUN_ROWS: dict[str, list[tuple[str, Any]]] = {
    "respond": [
        ("[[respond:a]]", TEXT),
        (r'[[!respond:a|pattern="^[A-Z]{3}-\d{2}$"]]', "AAA-00"),
        ("[[respond:a|min_length=5, max_length=8]]", "aaaaa"),
        (r'[[respond{2}:a|pattern="(cat|dog)s?\b"]]', ["cat", "cat"]),
        ("[[respond:a|max_length=0]]", ""),
    ],
    "extract": [("[[extract:a]]", TEXT), ('[[extract:a|pattern="[^a-z]{3,}$", max_length=4]]', "AAA")],
    "think": [("[[think:a]]", TEXT), ("[[think*:a|min_length=3]]", ["aaa"])],
    "speak": [("[[speak:a]]", TEXT), ('[[speak:a|pattern="^(yes|no)$"]]', "yes")],
    "default": [("[[default:a]]", TEXT)],
    "poem": [("[[poem:a]]", TEXT), (r'[[poem:a|pattern="\w+ \w+", min_length=10]]', "a aaaaaaaa")],
    "pick": [("[[pick:a|red, green]]", "red"), ("[[pick{2,3}:a|x, y, z]]", ["x", "x"]), ("[[!pick:a|only]]", "only")],
    "bool": [("[[bool:a]]", False), ("[[bool+:a]]", [False])],
    "boolean": [("[[boolean:a]]", False)],
    "int": [("[[int:a]]", 0), ("[[int:a|min=10, max=12]]", 10), ("[[int:a|max=-3]]", -3), ("[[int{3}:a|min=1]]", [1, 1, 1])],
    "number": [
        ("[[number:a]]", 0),  # an integral number stays an int, as in 0.18 (issue 32)
        ("[[number:a|min=-5.5, max=-2]]", -5.5),
        ("[[number:a|max=-0.5]]", -0.5),
        ("[[number:a|min=2.25]]", 2.25),
    ],
    "date": [
        ("[[date:a]]", dt.date(2024, 1, 1)),
        ("[[date:a|min=2030-01-01, max=2030-01-05]]", dt.date(2030, 1, 1)),
        ("[[date:a|max=2020-06-01]]", dt.date(2020, 6, 1)),
        ("[[!date+:a|min=2031-02-03]]", [dt.date(2031, 2, 3)]),
    ],
    "datetime": [
        ("[[datetime:a]]", dt.datetime(2024, 1, 1, 9, 0)),
        ('[[datetime:a|min="2031-01-01T00:00:00+02:00"]]', dt.datetime(2031, 1, 1, tzinfo=UTC2)),
        ('[[datetime:a|max="2001-01-01T08:30:00"]]', dt.datetime(2001, 1, 1, 8, 30)),
    ],
    "time": [
        ("[[time:a]]", dt.time(9, 0)),
        ('[[time:a|min="13:00", max="14:00"]]', dt.time(13, 0)),
        ('[[time:a|max="08:15"]]', dt.time(8, 15)),
        ('[[time*:a|min="23:59"]]', [dt.time(23, 59)]),
    ],
    "duration": [
        ("[[duration:a]]", dt.timedelta(hours=1)),
        ("[[duration:a|min=P2D]]", dt.timedelta(days=2)),
        ("[[duration:a|max=PT30M]]", dt.timedelta(minutes=30)),
        ("[[duration:a|min=PT2H, max=PT3H]]", dt.timedelta(hours=2)),
    ],
    "json": [("[[json:a]]", "a"), ("[[!json:a]]", {})],
    "record": [("[[record:a]]", {}), ("[[record+:a]]", [{}])],
    "score": [("[[score:a]]", 0), ("[[score:a|poor, fair, good]]", 0), ("[[score:a|min=3, max=5]]", 3)],
    "halt": [("[[halt:a]]", {"triggered": False, "reason": "a"})],
    "decide": [("[[decide:a]]", False), ("[[decide:a|sales, support]]", "sales")],
    "date_rule": [("[[date_rule:a]]", RULE)],
    "chunked_conversation": [("[[chunked_conversation:a]]", [{"description": "a", "start": 0, "end": 0}])],
}

ROWS = [pytest.param(slot, expected, id=slot) for rows in DRY_RUN_ROWS.values() for slot, expected in rows]


def test_every_builtin_type_has_dry_run_rows() -> None:
    assert set(DRY_RUN_ROWS) == set(BUILTIN_TYPES)


@pytest.mark.parametrize(("slot", "expected"), ROWS)
def test_model_test_answers_each_builtin_type_with_a_valid_sample(slot: str, expected: Any) -> None:
    result = sd.complete(f"Q {slot}", model="test")
    assert result["a"] == expected
    kind = type(result["a"])
    assert kind is type(expected) or (isinstance(expected, dict) and issubclass(kind, dict))  # a halt's Verdict


def test_sd_run_model_test_answers_every_builtin_type(tmp_path: Path) -> None:
    """One template, the most constrained row of each type (the CLI costs a second per 25 slots)."""
    rows = [rows[-1] for rows in DRY_RUN_ROWS.values()]
    template = tmp_path / "every.sd"
    template.write_text("".join(f"Q{i} {slot.replace(':a', f':s{i}', 1)}\n" for i, (slot, _) in enumerate(rows)))
    result = sd_cli("run", template, "--model", "test", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {f"s{i}": jsonable(value) for i, (_, value) in enumerate(rows)}


@pytest.mark.parametrize(
    ("pattern", "low", "high", "text"),
    [
        (r"^\d{4}-\d{2}-\d{2}$", None, None, "0000-00-00"),
        (r"^[^\W\d_]+$", 3, None, "aaa"),
        (r"(?P<q>['\"]).+(?P=q)", None, None, '"a"'),
        (r"^(?:ab)+$", 5, 6, "ababab"),
        (r"colou?r", 8, None, "coloraaa"),
        (r"^a(?=b)", None, None, None),  # a look-ahead this generator cannot satisfy: no sample, no crash
        (r"\p{L}+", None, None, None),  # a syntax Python's parser lacks
    ],
)
def test_text_matching_finds_a_string_the_pattern_accepts(
    pattern: str, low: int | None, high: int | None, text: str | None
) -> None:
    assert text_matching(pattern, low, high) == text
