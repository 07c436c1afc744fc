"""MCP servers on a real local Dask cluster (two worker processes): each worker opens
one session per server for its rows of a batch and closes it when the batch ends."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from mcp_support import HttpServer

import struckdown as sd

pytestmark = pytest.mark.cluster


def _open_batches() -> int:
    from struckdown.distributed import worker

    return len(worker._mcp_sessions)


def test_each_worker_opens_one_session_per_server_for_a_batch(notes: HttpServer) -> None:
    from distributed import Client, LocalCluster

    from struckdown.distributed import DaskExecutor

    with LocalCluster(
        host="127.0.0.1", dashboard_address=None, n_workers=2, threads_per_worker=4, processes=True,
        silence_logs=logging.ERROR, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    ) as cluster, Client(cluster, set_as_default=False) as client:  # fmt: skip
        executor = DaskExecutor(client=client, max_in_flight=8)
        rows = [{"word": f"w{i}"} for i in range(12)]

        async def main() -> list[Any]:
            return await sd.complete_batch_async(
                "Look up {{ word }} [[a|mcp=notes]]", rows, executor=executor,
                model_factory="mcp_models:lookup_model", mcp={"notes": notes.url},
            )  # type: ignore[call-arg]  # fmt: skip

        results = asyncio.run(main())
        assert [r["a"] for r in results] == [f"got w{i}: a note about w{i}" for i in range(12)]
        assert 1 <= notes.record.sessions <= 2  # one per worker that ran rows, not one per row
        assert list(client.run(_open_batches).values()) == [0, 0]  # closed with the batch
        executor.close()
