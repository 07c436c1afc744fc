"""SPEC §33: no labels anywhere, no refusals. `sd check --flow` over `examples/` and the 0.x
corpus (tests/migration/templates_0x) reports exactly what `sd check` reports; and the plan's
walk gives no slot of them a private label."""

from __future__ import annotations

from pathlib import Path

import pytest

import struckdown as sd
from cli_support import plain_environment, sd as sd_cli  # noqa: F401 - the autouse fixture
from struckdown.flow import slot_flows, template_refusals

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "examples").glob("*.sd")) + sorted((ROOT / "tests/migration/templates_0x").rglob("*.sd"))


def test_the_corpora_are_there() -> None:
    assert len(TEMPLATES) >= 15


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_check_flow_without_labels_adds_nothing(path: Path) -> None:
    plain, flow = sd_cli("check", path), sd_cli("check", path, "--flow")
    assert (flow.exit_code, flow.output) == (plain.exit_code, plain.output)


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_labels_means_no_labels_on_any_slot(path: Path) -> None:
    try:
        program = sd.Environment().parse(path.read_text(), template_path=path)
    except sd.StruckdownError:
        pytest.fail(f"{path} does not parse")
    assert template_refusals(program, model="test") == []
    flows = slot_flows(program, {}, tool_results_untrusted=True)
    assert [plan.slot for plan, _ in flows] == program.slots()
    for plan, flow in flows:  # only what @fetch, @search and tools bring in is untrusted
        assert flow.labels() <= {"untrusted"}, plan.key
