"""SPEC §25 under several processes: `sd batch` killed (SIGKILL) at each point of a write
tool's life, with its rows in this process (local), in `--workers 2` processes (a private
Dask cluster) or on a Dask cluster of its own (a scheduler and two worker processes the
test starts); and a Dask worker killed under a row, which Dask runs again elsewhere.
After `--resume` (or the re-run), every refund happened exactly once, the call that was
cut off was settled by the tool's reconcile hook, and the row that had finished never
entered its tool again.

Row 1 finishes first (row 0 waits on a gate until the model tells the test so); then
row 0 goes on to the point under test and blocks there: `call` (the model is about to
ask for the tool: nothing journaled), `before` (in the tool, before the effect),
`during` (between its two ledger writes), `after` (the effect made, not returned),
`answered` (the result journaled as done, the model reading it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from finished_journal import only_finished_journal
from process_gates import Release, fifo, wait_for_gate

pytestmark = pytest.mark.cluster  # worker processes, a Dask cluster

SUPPORT = Path(__file__).resolve().parents[1] / "support"
PYTHONPATH = os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")]))
POINTS = ["call", "before", "during", "after", "answered"]

#: The bank: a refund is two ledger lines (debit, credit); the hook finds a refund by its
#: effect id and finishes one cut off between its two lines.
TOOLS = '''
import os
import pathlib

import struckdown as sd
from durable_rows import once, stop_here
from pydantic_ai import RunContext

DIR = {folder!r}


def _note(name, line):
    fd = os.open(os.path.join(DIR, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\\n").encode())
    finally:
        os.close(fd)


def _stop(order, point):
    here = pathlib.Path(DIR, "point").read_text().strip()
    if order == "R0" and here == point and once(DIR, "stop"):
        stop_here(DIR, point)


def look_up(effect_id, arguments):
    _note("asked", effect_id)
    ledger = pathlib.Path(DIR, "ledger")
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    if "credit " + effect_id in lines:
        return "refunded " + arguments["order"]
    if "debit " + effect_id in lines:  # cut off between its two writes: finish it
        _note("ledger", "credit " + effect_id)
        return "refunded " + arguments["order"]
    return None


@sd.effect(reconcile=look_up)
def refund(ctx: RunContext, order: str) -> str:
    """Refund an order: moves money from the shop to the customer."""
    _note("entered", order + " " + ctx.effect_id)
    _stop(order, "before")
    _note("ledger", "debit " + ctx.effect_id)
    _stop(order, "during")
    _note("ledger", "credit " + ctx.effect_id)
    _stop(order, "after")
    return "refunded " + order
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and two worker processes (each under a nanny, which starts it again when
    it is killed), as `dask scheduler` / `dask worker` run them; yields the address."""
    folder = tmp_path_factory.mktemp("cluster")
    scheduler_file = folder / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": PYTHONPATH}
    dask = [sys.executable, "-m"]
    started = [
        subprocess.Popen([*dask, "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                          "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(scheduler_file)],
                         env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True),
    ]
    try:
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout=60, set_as_default=False) as client:
            address = client.scheduler.address
            started.append(subprocess.Popen(
                [*dask, "distributed.cli.dask_worker", address, "--host", "127.0.0.1", "--nworkers", "2",
                 "--nthreads", "2", "--dashboard-address", "127.0.0.1:0"],
                env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            ))  # fmt: skip
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for process in started:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


def two_workers(address: str) -> None:
    """Wait until the cluster has its two workers (a killed one is started again by its nanny)."""
    from distributed import Client

    with Client(address, timeout=60, set_as_default=False) as client:
        client.wait_for_workers(2, timeout=120)


def sd_batch(folder: Path, engine: list[str], *more: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "struckdown.cli", "batch", "t.sd", "rows.jsonl", "-o", "out.jsonl", "-j", "2",
               "--tools", "tools.py", "--model", "durable_rows:refunds", "--no-cache", *engine, *more]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "STRUCKDOWN_CACHE_DIR": str(folder / "cache")}
    return subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: its --workers processes die with it


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = process.communicate(timeout=300)  # only a guard against hanging the suite
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return process.returncode, err


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("how", ["local", "workers", "dask", "dask-worker"])
def test_a_killed_batch_makes_each_effect_exactly_once(tmp_path: Path, request: Any, how: str, point: str) -> None:
    engine = {"local": [], "workers": ["--workers", "2"]}.get(how)
    if engine is None:
        address = request.getfixturevalue("cluster")
        two_workers(address)
        engine = ["--engine", "dask", "--address", address]
    (tmp_path / "tools.py").write_text(TOOLS.format(folder=str(tmp_path)))
    (tmp_path / "t.sd").write_text("Refund order {{ order }}. dir={{ dir }} [[reply|use_tools=true, max_iter=3]]\n")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"order": f"R{i}", "dir": str(tmp_path)}) + "\n"
                                                 for i in range(2)))  # fmt: skip
    (tmp_path / "point").write_text(point)
    go, row1, stopped = Release(tmp_path / "go"), fifo(tmp_path / "row1"), fifo(tmp_path / "stopped")

    process = sd_batch(tmp_path, engine)
    try:
        assert wait_for_gate(row1, process) == "1"  # row 1 finished (on whichever process ran it)
        go.release()  # row 0 goes on, to the point
        where, pid = wait_for_gate(stopped, process).split()
        assert where == point
        if how == "dask-worker":  # only the worker dies: Dask runs its row again on a worker
            os.kill(int(pid), signal.SIGKILL)
        else:
            if how == "dask":  # sd and the worker under the row die (the workers of --workers die with sd)
                os.kill(int(pid), signal.SIGKILL)
            os.killpg(process.pid, signal.SIGKILL)
    except BaseException:
        finish(process)
        raise
    code, err = finish(process)
    ran_before = Counter(lines(tmp_path / "entered"))
    if how == "dask-worker":
        assert code == 0, err[-3000:]
    else:
        assert code == -signal.SIGKILL, err[-3000:]
        (tmp_path / "point").write_text("")
        if how == "dask":
            two_workers(engine[-1])
        code, err = finish(sd_batch(tmp_path, engine, "--resume"))
        assert code == 0, err[-3000:]

    rows = [json.loads(line) for line in lines(tmp_path / "out.jsonl")]
    assert [row["reply"] for row in rows] == ["done: refunded R0", "done: refunded R1"]
    ledger = lines(tmp_path / "ledger")
    ids = {line.split()[1] for line in ledger}
    assert len(ids) == 2 and all(i.startswith("eff_") for i in ids)
    assert sorted(ledger) == sorted([f"{kind} {i}" for i in ids for kind in ("debit", "credit")])  # each once
    entered = Counter(lines(tmp_path / "entered"))
    (r1,) = [line for line in entered if line.startswith("R1 ")]
    (r0,) = [line for line in entered if line.startswith("R0 ")]
    assert entered[r1] == 1 and ran_before[r1] == 1  # row 1 had finished: its tool never ran again
    r0_id = r0.split()[1]
    # cut off in the tool: the hook settles it (before the effect it says "no", and the call runs)
    assert lines(tmp_path / "asked") == ([r0_id] if point in ("before", "during", "after") else [])
    assert entered[r0] == (2 if point == "before" else 1)
    assert only_finished_journal(tmp_path)  # every row done: the journal is its finished record, its shards gone
