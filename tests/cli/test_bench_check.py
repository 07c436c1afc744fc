"""`python -m bench --check` (bench/check.py): the recorded ratios of docs/performance.md
are read, and a row more than 20 % worse than its record fails, in the row's direction."""

from __future__ import annotations

from pathlib import Path

from bench.check import PERFORMANCE_MD, judge, recorded_ratios
from bench.common import Row


def row(case: str, ratio: float | None, target: str = "<= 1.10x") -> Row:
    return Row(case, "m", "f", ratio, target, None if ratio is None else True)


def test_the_recorded_table_holds_the_rows_ci_checks() -> None:
    recorded = recorded_ratios(PERFORMANCE_MD)
    for case in ("e. sd --help (CPU)", "e. sd check (CPU)", "e. sd run --model test (CPU)",
                 "a. per-slot overhead, 10 free-text slots", "a. per-slot overhead, 10 typed int slots",
                 "r. sd batch CPU per row vs bare agent.run (this tree, -j 64)"):
        assert case in recorded, case


def test_a_cost_fails_above_120_percent_of_its_record() -> None:
    verdicts = judge([row("x", 1.20), row("y", 1.21), row("z", 0.50)], {"x": 1.0, "y": 1.0, "z": 1.0})
    assert [(v.case, v.passed) for v in verdicts] == [("x", True), ("y", False), ("z", True)]
    assert verdicts[1].why == "1.21x > 1.20x"


def test_a_speed_fails_below_80_percent_of_its_record() -> None:
    verdicts = judge([row("p", 0.79, ">= 1.00x"), row("q", 0.80, ">= 1.00x")], {"p": 1.0, "q": 1.0})
    assert [(v.case, v.passed) for v in verdicts] == [("p", False), ("q", True)]


def test_unrecorded_rows_pass_and_a_failed_case_fails() -> None:
    verdicts = judge([row("new", 3.0), row("broken", None)], {"broken": 1.0})
    assert [(v.case, v.passed, v.why.split(":")[0]) for v in verdicts] == [
        ("new", True, "not recorded"), ("broken", False, "not measured"),
    ]


def test_ratios_are_read_from_the_section_only(tmp_path: Path) -> None:
    page = tmp_path / "performance.md"
    page.write_text(
        "# Performance\n\n| a. old | 9.00x |\n\n## Recorded ratios\n\n| case | ratio | target |\n|---|---|---|\n"
        "| a. one | 1.02x | <= 1.10x |\n| `e. two` | 0.03× | <= 0.05x |\n\n## Later\n\n| a. one | 5.00x |\n",
        encoding="utf-8",
    )
    assert recorded_ratios(page) == {"a. one": 1.02, "e. two": 0.03}


def test_a_tiny_ratio_may_move_by_the_absolute_slack() -> None:
    # 0.034x + 0.015 = 0.049x: CPU accounting of a 30 ms process moves by ~10 ms.
    verdicts = judge([row("s", 0.048), row("t", 0.050)], {"s": 0.034, "t": 0.034})
    assert [(v.case, v.passed) for v in verdicts] == [("s", True), ("t", False)]
    assert verdicts[1].why == "0.050x > 0.049x"


def test_a_second_measurement_keeps_the_better_ratio_in_each_direction() -> None:
    from bench.check import best_of, failed_cases

    first = [row("a. cost", 1.40), row("a. speed", 0.70, ">= 1.00x"), row("e. kept", 0.30), row("e. none", None)]
    again = [row("a. cost", 1.05), row("a. speed", 0.60, ">= 1.00x"), row("e. kept", 0.50), row("e. none", 0.20)]
    verdicts = judge(first, {"a. cost": 1.0, "a. speed": 1.0, "e. kept": 0.3, "e. none": 0.2})
    assert failed_cases(verdicts) == ["a", "e"]
    assert [r.ratio for r in best_of(first, again)] == [1.05, 0.70, 0.30, 0.20]
