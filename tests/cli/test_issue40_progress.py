"""Issue 40 item 15: batch progress. The first ETA comes from the rows that finished (a
row's own time and the rows that run at once), `sd explain` shows a slot's per-tool
`budget=`. (`--head N` with N < -j: tests/migration/test_cli_0x.py, the projection.)"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cli_support import plain_environment, sd  # noqa: F401 - fixtures
from rich.console import Console

from struckdown.cli.progress import BatchProgress


def plain_progress(total: int, concurrency: int) -> tuple[BatchProgress, io.StringIO, list[float]]:
    """A progress on a plain (non-terminal) stream, on a clock the test moves."""
    out = io.StringIO()
    now = [0.0]
    progress = BatchProgress(Console(file=out), total, 0, concurrency=concurrency)
    progress.clock = lambda: now[0]
    progress.started = 0.0
    return progress, out, now


def test_the_first_eta_counts_the_rows_still_running_beside_the_first() -> None:
    """16 rows at -j 8, every row 4 s: the first row finishes at 4 s with seven beside it;
    the other 15 take two more rounds of 4 s (7.5 s: 15 rows x 4 s / 8), not 15 x 4 s."""
    progress, out, now = plain_progress(16, 8)
    with progress:
        now[0] = 4.0
        progress.advance(True, seconds=4.0)
        assert out.getvalue() == "batch: 1/16 rows, 2.0 rows/s, ETA 8s\n"
        for _ in range(12):
            progress.advance(True, seconds=4.0)  # the rest of the first round, and some of the second
        now[0] = 8.0
        progress.advance(True, seconds=4.0)
        assert out.getvalue().splitlines()[-1] == "batch: 14/16 rows, 2.0 rows/s, ETA 4s"  # two left: one row's time
        progress.advance(True, seconds=4.0)
        progress.advance(True, seconds=4.0)
    assert out.getvalue().splitlines()[-1] == "batch: 16/16 rows, 2.0 rows/s"


def test_no_eta_before_a_row_finished_and_rows_not_run_take_no_time() -> None:
    progress, out, now = plain_progress(4, 2)
    assert progress.eta() is None
    with progress:
        now[0] = 2.0
        progress.advance(False, unrun=True, seconds=0.0)  # kept from starting by the budget: no row time
        assert progress.eta() is not None  # without row times: rows finished / time so far (1 row in 2 s)
        progress.advance(True, seconds=2.0)
        assert progress.eta() == 2.0  # two rows left, two at a time, 2 s a row


def test_sd_explain_shows_the_per_tool_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # one line a node
    template = tmp_path / "t.sd"
    template.write_text('Look [[a|use_tools=true, budget="lookup=2, other=1"]]\n\nThen [[b|use_tools=true, budget={{ b }}]]\n')
    tools = tmp_path / "tools.py"
    tools.write_text(
        'def lookup(w: str) -> str:\n    """L."""\n    return w\n\n\n'
        'def other(w: str) -> str:\n    """O."""\n    return w\n'
    )
    result = sd("explain", template, "--tools", tools)
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert "budget per tool: lookup 2 calls · other 1 call (budget=; the caller's tool_limits= caps them)" in flat
    assert "budget={{ b }}: calls per tool, set when the slot runs" in flat
