"""`sd.evaluate` of an example's eval file against the real local model (SPEC §23): the
report's shape, not its pass rate (a small local model may well answer wrongly)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import struckdown as sd

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_quickstart_eval_runs_on_the_local_model(model: Any) -> None:
    report = sd.evaluate(EXAMPLES / "quickstart.sd", EXAMPLES / "quickstart.eval.yaml", models={"local": model},
                         repeat=2, settings={"seed": 7, "max_tokens": 200})

    assert [(c.name, c.model, c.runs) for c in report.cases] == [("mostly positive", "local", 2), ("negative", "local", 2)]
    assert all(o.error is None for o in report.outcomes), [o.error for o in report.outcomes]
    assert all(o.requests == 2 for o in report.outcomes)
    assert set(report.by_slot) == {"summary", "positive"}
    assert all(total == 4 for _, total in report.by_slot.values())
    data = json.loads(report.to_json())
    assert data["template"] == "quickstart.sd" and data["models"] == ["local"]
    for case in data["cases"]:
        low, high = case["interval"]
        assert 0 <= low <= case["pass_rate"] <= high <= 1
    root = ET.fromstring(report.to_junit())
    assert [c.get("name") for c in root.iter("testcase")] == ["mostly positive", "negative"]
