"""struckdown.distributed.DaskExecutor and `sd batch --engine dask` on a real local Dask cluster.

One cluster (two worker processes on 127.0.0.1, no dashboard) serves the module.
Models cannot travel, so the workers build the scripted model `cli_models:dask_rows`
by name; it takes its orders from the prompt (a gate the test releases, a log of call starts and ends,
fail once, fail always), so nothing has to be set in the workers' environment.
The workers find `cli_models` because they are spawned with this process's sys.path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.cluster
from typer.testing import CliRunner

import struckdown as sd
from cli_models import dask_rows, peak_overlap
from process_gates import RowGates
from struckdown.cli.app import app
from struckdown.cli.errors import describe
from struckdown.distributed import DaskExecutor, is_transient, ship_kwargs
from finished_journal import finished

FACTORY = "cli_models:dask_rows"
TEMPLATE = (
    "Row {{ id }} log={{ log }} gate={{ gate }} flaky={{ flaky }} fail={{ fail }}\n"
    "[[answer]]\n\nAnd the number? [[int:n]]\n"
)


@pytest.fixture(scope="module")
def client() -> Any:
    import dask  # here, not at collection: the default run collects this file but never runs it
    from distributed import Client, LocalCluster

    # Short semaphore leases, so that a killed worker's leases come back quickly.
    config = {
        "distributed.scheduler.locks.lease-timeout": "3s",
        "distributed.scheduler.locks.lease-validation-interval": "0.5s",
    }
    with dask.config.set(config):
        with LocalCluster(
            host="127.0.0.1",
            dashboard_address=None,
            n_workers=2,
            threads_per_worker=4,
            processes=True,
            silence_logs=logging.ERROR,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as cluster, Client(cluster, set_as_default=False) as dask_client:
            yield dask_client


def rows(n: int, **options: Any) -> list[dict[str, Any]]:
    base = {"log": "", "gate": "", "flaky": "", "fail": ""}
    return [{**base, "id": i, **{k: v(i) if callable(v) else v for k, v in options.items()}} for i in range(n)]


def run(contexts: list[dict[str, Any]], executor: Any, **kwargs: Any) -> tuple[list[Any], list[int]]:
    finished: list[int] = []

    def on_result(index: int, outcome: Any) -> None:
        finished.append(index)

    results = asyncio.run(
        sd.complete_batch_async(TEMPLATE, contexts, executor=executor, on_result=on_result, **kwargs)
    )
    return results, finished


def log_lines(path: Path) -> list[tuple[str, int, float, int]]:
    out = []
    for line in path.read_text().splitlines():
        kind, row, when, pid = line.split()
        out.append((kind, int(row), float(when), int(pid)))
    return out


def test_results_equal_the_local_executors_in_input_order(client: Any) -> None:
    contexts = rows(10, fail=lambda i: "yes" if i == 6 else "")
    remote, finished = run(contexts, DaskExecutor(client=client, max_in_flight=4), model_factory=FACTORY)
    local = asyncio.run(sd.complete_batch_async(TEMPLATE, contexts, model=dask_rows()))
    assert sorted(finished) == list(range(10))  # every row reported once, as it finished
    assert len(remote) == len(local) == 10
    for mine, theirs in zip(remote, local):
        if isinstance(theirs, BaseException):
            assert type(mine) is type(theirs) and describe(mine) == describe(theirs)
        else:
            assert isinstance(mine, sd.Result)
            assert dict(mine) == dict(theirs) and list(mine) == list(theirs)
            assert mine.usage == theirs.usage and mine.halted is None
    assert dict(remote[3]) == {"answer": "answer 3", "n": 3}
    assert describe(remote[6]) == "slot 'answer': ValueError: row 6 is cursed"  # the slot tag survives


def test_the_cap_on_rows_in_flight_holds_across_the_cluster(client: Any, tmp_path: Path) -> None:
    log, gates = tmp_path / "calls.log", RowGates(tmp_path / "gates", 12)
    contexts = rows(12, log=str(log), gate=str(gates.folder))
    # 8 task slots on the cluster, but only 2 rows may hold the semaphore at once: two
    # rows are held until both have started (the cap is reached), then all go on
    executor = DaskExecutor(client=client, max_in_flight=2)
    results, _ = gates.conduct(lambda: run(contexts, executor, model_factory=FACTORY), lambda g: g.hold_until(2))
    gates.close()
    assert [r["answer"] for r in results] == [f"answer {i}" for i in range(12)]
    lines = log_lines(log)
    assert len(lines) == 2 * 12 * 2  # start and end of two model calls per row
    assert peak_overlap(lines) == 2  # the cap was reached and never exceeded
    assert len({pid for *_, pid in lines}) == 2  # both workers ran rows


def test_a_transient_error_is_retried_and_a_permanent_one_is_not(client: Any, tmp_path: Path) -> None:
    log, marks = tmp_path / "calls.log", tmp_path / "marks"
    marks.mkdir()
    contexts = rows(
        5, log=str(log), flaky=lambda i: str(marks) if i in (1, 3) else "", fail=lambda i: "yes" if i == 4 else ""
    )
    executor = DaskExecutor(client=client, max_in_flight=4, retries=2, retry_delay=0)
    results, finished = run(contexts, executor, model_factory=FACTORY)
    assert [dict(r) for r in results[:4]] == [{"answer": f"answer {i}", "n": i} for i in range(4)]
    assert isinstance(results[4], ValueError)
    assert sorted(finished) == list(range(5))
    starts = Counter(row for kind, row, *_ in log_lines(log) if kind == "start")
    assert starts[1] == starts[3] == 3  # 429 on the first call, then the whole row again: 2 calls
    assert starts[0] == starts[2] == 2 and starts[4] == 1  # a ValueError is not retried


def test_without_retries_the_rate_limit_error_is_the_rows_outcome(client: Any, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    executor = DaskExecutor(client=client, max_in_flight=2, retries=0)
    # retries=0: no per-request retry on the worker either (SPEC §14), so the 429 is the row's outcome
    results, _ = run(rows(2, flaky=lambda i: str(marks) if i == 1 else ""), executor, model_factory=FACTORY, retries=0)
    assert dict(results[0]) == {"answer": "answer 0", "n": 0}
    error = results[1]
    assert isinstance(error, sd.RateLimitError) and error.status == 429 and is_transient(error)
    message = describe(error)
    assert message.startswith("slot 'answer': RateLimitError: model ") and "rate limited (HTTP 429): slow down" in message


def test_a_halted_row_comes_back_whole(client: Any) -> None:
    """Result and Halted point at each other; both survive the trip, as on_halt says."""
    template = "Hello {{ x }}. Is it bad? [[halt:stop]]\n\nReply: [[reply]]\n"
    executor = DaskExecutor(client=client, max_in_flight=2)
    for on_halt in ("return", "raise"):
        (outcome,) = asyncio.run(
            sd.complete_batch_async(
                template, [{"x": 1}], executor=executor, model_factory="cli_models:guards_trip", on_halt=on_halt
            )
        )
        halted = outcome.halted if on_halt == "return" else outcome
        assert isinstance(halted, sd.Halted) and (halted.slot, halted.reason) == ("stop", "scripted trip")
        assert halted.results is not None and halted.results.halted is halted
        assert dict(halted.results)["stop"] == {"triggered": True, "reason": "scripted trip"}


def test_only_plain_data_is_shipped(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model_factory="):
        ship_kwargs({"model": dask_rows()})
    with pytest.raises(ValueError, match="'test_dask:test_only_plain_data_is_shipped'"):
        ship_kwargs({"tools": [test_only_plain_data_is_shipped]})
    with pytest.raises(ValueError, match="deps_factory="):
        ship_kwargs({"deps": object()})
    with pytest.raises(ValueError, match="cache="):
        ship_kwargs({"cache": sd.Result({})})
    with pytest.raises(ValueError, match="importable name"):
        ship_kwargs({"model_factory": "no_colon"})
    with pytest.raises(TypeError, match="stream"):
        ship_kwargs({"stream": True})
    tools = tmp_path / "my_tools.py"
    tools.write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    shipped = ship_kwargs({
        "model": "test", "tools": ["json:dumps", str(tools)], "deps": {"k": [1]}, "cache": tmp_path,
        "settings": {"temperature": 0},
    })  # fmt: skip
    assert shipped["tools"] == (("name", "json:dumps"), ("file", str(tools.resolve()), tools.read_text()))
    assert shipped["cache"] == str(tmp_path) and shipped["deps"] == {"k": [1]}


def test_probe_resolves_the_setup_on_a_worker(client: Any, tmp_path: Path) -> None:
    tools = tmp_path / "my_tools.py"
    tools.write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    executor = DaskExecutor(client=client)
    asyncio.run(executor.probe(model_factory=FACTORY, tools=[str(tools), "cli_models:last_prompt"]))
    with pytest.raises(ModuleNotFoundError):
        asyncio.run(executor.probe(model_factory="no_such_module:factory"))
    results, _ = run(rows(2), executor, model="test")  # pydantic-ai's TestModel, built on the workers
    assert [sorted(r) for r in results] == [["answer", "n"], ["answer", "n"]]


def cli(*args: Any) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    return result


def test_sd_batch_engine_dask_resumes_from_its_journal(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))
    log, marks = tmp_path / "calls.log", tmp_path / "marks"
    marks.mkdir()
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} log={{ log }} flaky={{ flaky }}\n[[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    records = [{"id": i, "log": str(log), "flaky": str(marks) if i in (2, 5) else ""} for i in range(7)]
    inputs.write_text("".join(json.dumps(r) + "\n" for r in records))
    out, journal = tmp_path / "out.jsonl", tmp_path / "out.journal.jsonl"
    address = client.scheduler.address
    args = ["batch", template, inputs, "-o", out, "--engine", "dask", "--address", address, "-j", "3", "--no-cache"]
    args += ["--model", FACTORY]  # a `module:factory` name travels to the workers as text

    first = cli(*args, "--retries", "0")  # rows 2 and 5 hit a 429 and are not retried
    assert first.exit_code == 1, first.output
    assert "5 ok, 2 failed" in first.stderr and "rate limited (HTTP 429)" in first.stderr
    assert sorted(e["index"] for e in map(json.loads, journal.read_text().splitlines()) if not e["ok"]) == [2, 5]

    again = cli(*args, "--resume")
    assert again.exit_code == 0, again.output
    assert "resuming" in again.stderr and "5 of 7 rows done, 2 failed rows run again" in again.stderr
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["answer"]) for r in written] == [(i, f"answer {i}") for i in range(7)]
    starts = Counter(row for kind, row, *_ in log_lines(log) if kind == "start")
    assert starts == {**{i: 1 for i in range(7)}, 2: 2, 5: 2}  # done rows were not run again
    assert finished(journal)


def test_sd_batch_engine_dask_on_a_private_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No --address: sd starts two local worker processes (spawned with this sys.path,
    so they import cli_models), runs the rows there and shuts them down."""
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path / "cache"))
    template = tmp_path / "t.sd"
    template.write_text("Row {{ id }} [[answer]]\n", encoding="utf-8")
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(6)))
    out = tmp_path / "out.csv"
    done = cli("batch", template, inputs, "-o", out, "--engine", "dask", "-j", "4", "--model", FACTORY)
    assert done.exit_code == 0, done.output
    assert "batch: 6 rows → " in done.stderr and "6 ok" in done.stderr
    assert "ERROR" not in done.stderr
    assert out.read_text().splitlines() == ["id,answer", *(f"{i},answer {i}" for i in range(6))]


def test_a_private_clusters_workers_freeze_their_start_up_heap_and_a_shared_ones_do_not(client: Any) -> None:
    """The workers of a cluster the executor started live for its batches: their heap is
    frozen before the first rows (full collections then skip it). A cluster you run is
    left as it is."""
    import gc

    contexts = rows(4)
    results, _ = run(contexts, DaskExecutor(client=client, max_in_flight=2), model_factory=FACTORY)
    assert [r["answer"] for r in results] == [f"answer {i}" for i in range(4)]
    assert set(client.run(gc.get_freeze_count).values()) == {0}

    with DaskExecutor(n_workers=1, max_in_flight=2) as private:
        results, _ = run(contexts, private, model_factory=FACTORY)
        frozen = list(private.client.run(gc.get_freeze_count).values())
    assert [r["answer"] for r in results] == [f"answer {i}" for i in range(4)]
    assert len(frozen) == 1 and frozen[0] > 10_000  # modules, schemas, Dask's own objects


REFUND_TOOLS = """
import os
import struckdown as sd
from pydantic_ai import RunContext

@sd.effect(reconcile=lambda effect_id, arguments: None)
def refund(ctx: RunContext, order: str) -> str:
    \"\"\"Refund an order.\"\"\"
    fd = os.open({ledger!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (order + " " + ctx.effect_id + " " + str(os.getpid()) + "\\n").encode())
    os.close(fd)
    return "refunded " + order
"""


def test_a_journaled_batch_on_workers_writes_a_shard_per_worker_and_runs_each_effect_once(
    client: Any, tmp_path: Path
) -> None:
    """SPEC §25: journal= with an executor: this process locks the journal and writes its
    header; each worker appends to a shard of its own (JOURNAL.workerN); the same batch
    again is answered from the journal, with the same effect ids, and no tool runs."""
    ledger, journal, tools = tmp_path / "ledger", tmp_path / "effects.jsonl", tmp_path / "refunds.py"
    tools.write_text(REFUND_TOOLS.format(ledger=str(ledger)))
    contexts = [{"order": f"R{i}", "dir": str(tmp_path)} for i in range(8)]
    template = "Refund order {{ order }}. dir={{ dir }} [[reply|use_tools=true, max_iter=3]]\n"

    def batch() -> list[Any]:
        return sd.complete_batch(template, contexts, executor=DaskExecutor(client=client, max_in_flight=8),
                                 model_factory="durable_rows:refunds", tools=[str(tools)], journal=journal)

    first = batch()
    assert [r["reply"] for r in first] == [f"done: refunded R{i}" for i in range(8)]
    made = [line.split() for line in ledger.read_text().splitlines()]
    assert sorted(order for order, *_ in made) == [f"R{i}" for i in range(8)]
    header, *own = [json.loads(line) for line in journal.read_text().splitlines()]
    assert header["journal"] == "struckdown effects" and own == []  # the rows ran on the workers
    shards = sorted(tmp_path.glob("effects.jsonl.worker*[0-9]"))
    workers_used = {pid for *_, pid in made}
    assert [s.name for s in shards] == [f"effects.jsonl.worker{n}" for n in range(1, len(workers_used) + 1)]
    records = [json.loads(line) for shard in shards for line in shard.read_text().splitlines()]
    assert {r["job"] for r in records if "journal" in r} == {header["job"]}  # one job: one id per call
    started = {r["effect"]: r["row"] for r in records if r.get("state") == "started"}
    assert sorted(started.values()) == list(range(8))
    assert {effect for _, effect, _ in made} == set(started)
    assert not list(tmp_path.glob("*.lock"))  # every hold given back at the batch's end

    again = batch()  # the same calls: answered from the journal (theirs and the other workers')
    assert [r["reply"] for r in again] == [r["reply"] for r in first]
    assert len(ledger.read_text().splitlines()) == 8


def test_a_worker_killed_mid_batch_loses_and_repeats_no_row(client: Any, tmp_path: Path) -> None:
    """Runs last: the nanny restarts the killed worker, and the test waits for it. Two
    rows are held in their first call; the worker of the one that started last is
    killed while it holds it, then every row goes on."""
    log, gates = tmp_path / "calls.log", RowGates(tmp_path / "gates", 16)
    pids = set(client.run(os.getpid).values())
    killed: list[int] = []

    def kill_one_holding_a_row(g: RowGates) -> None:
        held = [g.next_start(), g.next_start()]
        victim = held[-1][1]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)

    finished: list[int] = []
    contexts = rows(16, log=str(log), gate=str(gates.folder))

    def batch() -> list[Any]:
        return asyncio.run(
            sd.complete_batch_async(
                TEMPLATE, contexts, executor=DaskExecutor(client=client, max_in_flight=8),
                on_result=lambda index, outcome: finished.append(index), model_factory=FACTORY,
            )
        )  # fmt: skip

    results = gates.conduct(batch, kill_one_holding_a_row)
    gates.close()
    assert killed and killed[0] in pids
    assert sorted(finished) == list(range(16))  # each row reported exactly once
    assert [dict(r) for r in results] == [{"answer": f"answer {i}", "n": i} for i in range(16)]
    starts = Counter(row for kind, row, *_ in log_lines(log) if kind == "start")
    assert any(count > 2 for count in starts.values())  # a row cut short by the kill ran again
    client.wait_for_workers(2, timeout=30)


def test_a_batch_budget_is_one_counter_for_the_whole_cluster(client: Any) -> None:
    """Rows run one at a time across both workers: two rows (2 requests each) spend a budget
    of 4 requests, and no row starts after that, whichever worker it lands on."""
    from pydantic_ai.usage import UsageLimits

    contexts = rows(6)
    results, finished = run(
        contexts, DaskExecutor(client=client, max_in_flight=1), model_factory=FACTORY,
        batch_limits=UsageLimits(request_limit=4),
    )
    assert sorted(finished) == list(range(6))
    ran = [r for r in results if isinstance(r, sd.Result)]
    stopped = [r for r in results if isinstance(r, sd.BudgetExceeded)]
    assert (len(ran), len(stopped)) == (2, 4)  # which two is the scheduler's choice
    assert sum(r.usage.requests for r in ran) == 4
    assert all(r.scope == "batch" and r.limit == "request_limit" for r in stopped)


def test_a_max_cost_with_an_unpriced_model_is_refused_on_the_workers_before_any_row(client: Any, tmp_path: Path) -> None:
    """Issue 48 item 2, SPEC §13: the workers resolve the model (here a factory only they build),
    so they check its price, before any row; with its price the same batch runs."""
    log = tmp_path / "calls.log"
    with pytest.raises(sd.ConfigurationError) as refused:
        run(rows(4, log=str(log)), DaskExecutor(client=client), model_factory=FACTORY, max_cost=1.0)
    worker, _, message = str(refused.value).partition(": ")  # a cluster you run: the worker that said so
    assert worker in {f"on Dask worker {address}" for address in client.scheduler_info()["workers"]}
    assert message == (
        "max_cost is set but the price of model 'dask-rows' is unknown, so the budget cannot be enforced; "
        "give it with prices={'dask-rows': {'input': USD, 'output': USD}} (USD per million tokens; CLI --prices FILE)"
    )
    assert not log.exists()  # no row ran
    prices = {"dask-rows": {"input": 1.0, "output": 1.0}}
    results, _ = run(rows(4, log=str(log)), DaskExecutor(client=client), model_factory=FACTORY, max_cost=1.0, prices=prices)
    assert [dict(r) for r in results] == [{"answer": f"answer {i}", "n": i} for i in range(4)]
