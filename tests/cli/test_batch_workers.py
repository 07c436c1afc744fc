"""`sd batch --workers N`: rows in N local processes (a private Dask cluster), one
journal, one cap; killed at exact points and resumed, every row comes out once."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cli_models import peak_overlap
from process_gates import RowGates
from finished_journal import finished

pytestmark = pytest.mark.cluster

SUPPORT = Path(__file__).resolve().parents[1] / "support"
MODEL = "cli_models:dask_rows"  # answers `Row N …` with `answer N`, built on the workers by name


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sd_batch(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`sd batch …` in its own process group; whatever the run leaves behind (worker
    processes of a batch that killed itself) is stopped with the group."""
    process = subprocess.Popen(
        [sys.executable, "-m", "struckdown.cli", "batch", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_batch_on_two_workers_killed_twice_gives_every_row_once_in_input_order(tmp_path: Path) -> None:
    n = 5000
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} [[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i, "text": f"t{i}"}) + "\n" for i in range(n)), encoding="utf-8")
    out, journal, calls = tmp_path / "out.jsonl", tmp_path / "out.journal.jsonl", tmp_path / "calls.txt"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")])),
        "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache"),
        "SD_TEST_CALLS": str(calls),  # the model appends N for every call of row N
    }
    args = [str(template), str(inputs), "-o", str(out), "--workers", "2", "-j", "16", "--no-cache", "--model", MODEL]
    kill_points = random.Random(22).sample(range(300, 2000), 2)  # random, and the same on every run

    journaled: list[set[int]] = []
    for run, kill_after in enumerate(kill_points):
        killed = sd_batch(args + (["--resume"] if run else []), {**env, "_STRUCKDOWN_BATCH_KILL_AFTER": str(kill_after)})
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        lines = read_jsonl(journal)
        before = set().union(*journaled)
        assert len(lines) == len(before) + kill_after  # the kill came right after the K-th row of this run
        assert all(e["ok"] for e in lines) and len({e["index"] for e in lines}) == len(lines)  # none twice
        journaled.append({e["index"] for e in lines} - before)
        assert not out.exists()

    done = sd_batch(args + ["--resume"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming {journal}: {sum(map(len, journaled)):,} of {n:,} rows done" in done.stderr
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == list(range(n))  # every row exactly once, in input order
    assert [r["answer"] for r in rows] == [f"answer {i}" for i in range(n)]
    assert finished(journal)
    made = Counter(int(line) for line in calls.read_text(encoding="utf-8").split())
    assert set(made) == set(range(n))
    assert all(made[i] == 1 for i in journaled[0])  # journaled before the first kill: never run again
    assert all(made[i] <= 2 for i in journaled[1])  # at most once more: in flight at the first kill


def test_jobs_cap_the_rows_of_the_whole_job_across_the_workers(tmp_path: Path) -> None:
    """-j 3 over two worker processes: rows are held until three run at once (the cap is
    reached; the workers' shares of it are 2 and 1), then all go on; never more than
    three at once in all, and both processes ran rows."""
    log, gates = tmp_path / "calls.log", RowGates(tmp_path / "gates", 12)
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} log={{ log }} gate={{ gate }}\n[[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i, "log": str(log), "gate": str(gates.folder)}) + "\n" for i in range(12)))
    out = tmp_path / "out.csv"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")])),
        "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache"),
    }
    args = [str(template), str(inputs), "-o", str(out), "--workers", "2", "-j", "3", "--model", MODEL]
    held: list[tuple[int, int]] = []
    done = gates.conduct(lambda: sd_batch(args, env), lambda g: held.extend(g.hold_until(3)))
    gates.close()
    assert len({pid for _, pid in held}) == 2  # three rows at once, on both workers
    assert done.returncode == 0, done.stderr[-3000:]
    assert "batch: 12 rows → " in done.stderr and "12 ok" in done.stderr
    lines = []
    for line in log.read_text().splitlines():
        kind, row, when, pid = line.split()
        lines.append((kind, int(row), float(when), int(pid)))
    assert len(lines) == 2 * 12
    assert peak_overlap(lines) == 3  # the cap was reached and never exceeded
    assert len({pid for *_, pid in lines}) == 2
    assert [r.split(",")[0] for r in out.read_text().splitlines()[1:]] == [str(i) for i in range(12)]


def test_workers_take_the_run_flags_they_used_to_refuse(tmp_path: Path) -> None:
    """SPEC §22: --max-cost, --prices, --fallback, --tool-timeout, --on-truncate, --retries and
    --max-tokens all travel to the workers (they were refused, or --fallback was)."""
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} [[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(6)), encoding="utf-8")
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"dask-rows": {"input": 1.0, "output": 2.0}, "test": {"input": 0, "output": 0}}),
                      encoding="utf-8")
    out = tmp_path / "out.jsonl"
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")]))}
    done = sd_batch([str(template), str(inputs), "-o", str(out), "--model", MODEL, "--workers", "2", "--no-cache",
                     "--max-cost", "5", "--prices", str(prices), "--fallback", "test", "--tool-timeout", "5",
                     "--on-truncate", "error", "--retries", "1", "--max-tokens", "50"], env)
    assert done.returncode == 0, done.stderr
    rows = read_jsonl(out)
    assert [row["answer"] for row in rows] == [f"answer {i}" for i in range(6)]


def test_workers_refuse_a_max_cost_they_cannot_price_before_any_row(tmp_path: Path) -> None:
    """Issue 48 item 2: `sd batch --workers 2 --max-cost 100` with no prices ran rows until
    "4 responses could not be priced"; like the local engine it is refused before any call."""
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} [[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(6)), encoding="utf-8")
    out, calls = tmp_path / "out.jsonl", tmp_path / "calls"
    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")])),
        "SD_TEST_CALLS": str(calls), "STRUCKDOWN_CACHE_DIR": str(tmp_path / "cache"),
    }  # fmt: skip
    done = sd_batch([str(template), str(inputs), "-o", str(out), "--model", MODEL, "--workers", "2",
                     "--max-cost", "100"], env)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (1, "", (
        "error: --max-cost is set but the price of model 'dask-rows' is unknown, so the budget cannot be enforced; "
        "give it with prices={'dask-rows': {'input': USD, 'output': USD}} (USD per million tokens; CLI --prices FILE)\n"
    ))  # fmt: skip
    assert not calls.exists() and not out.exists()
