"""The example eval files (examples/*.eval.yaml) read cleanly and name only their template's slots."""

from __future__ import annotations

from pathlib import Path

import pytest

import struckdown as sd
from struckdown.eval import load_suite
from struckdown.eval.cases import check_slots

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EVAL_FILES = sorted(EXAMPLES.glob("*.eval.yaml"))


def test_two_examples_have_eval_files() -> None:
    assert [p.name for p in EVAL_FILES] == ["classify_ticket.eval.yaml", "quickstart.eval.yaml"]


@pytest.mark.parametrize("path", EVAL_FILES, ids=[p.name for p in EVAL_FILES])
def test_example_eval_file_checks(path: Path) -> None:
    template = path.with_name(path.name.replace(".eval.yaml", ".sd"))
    suite = load_suite(path)
    program = sd.parse(template.read_text(encoding="utf-8"), template_path=template)
    check_slots(suite, program.keys, template.name)
    assert len(suite.cases) == 2 and all(case.expect for case in suite.cases)
