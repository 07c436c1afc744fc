"""Worker processes as the server sees them: warm spares, a time limit per job, a
cap on what a job may send back, and a kill for anything that overruns.

A job's messages are read with a deadline, so a worker stuck in a loop or
swapping costs the server nothing but a process to kill. A worker that finished
its job cleanly goes back to the idle list; one that overran, died or was left
by its client is killed and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

START_TIMEOUT_S = 60.0
JOBS_PER_WORKER = 200


@dataclass(frozen=True)
class PoolLimits:
    workers: int = 4  # jobs at the same time
    time_limit_s: float = 60.0  # per job, from its start to its last message
    output_bytes: int = 8_000_000  # all messages of one job
    memory_mb: int = 512  # address space above the warm worker's
    queue_timeout_s: float = 30.0  # how long a job waits for a free worker


class JobError(Exception):
    """A job ended by the server, not by the template (time, output, a dead worker)."""


class _Worker:
    def __init__(
        self, process: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, folder: str | None = None
    ) -> None:
        self.process = process
        self.reader = reader
        self.writer = writer
        self.folder = folder  # its temporary folder: removed by the server once the process is gone
        self.jobs = 0

    @property
    def alive(self) -> bool:
        return self.process.exitcode is None and not self.reader.at_eof()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()

    async def send(self, job: dict[str, Any]) -> None:
        self.writer.write((json.dumps(job) + "\n").encode())
        await self.writer.drain()

    async def read(self, deadline: float, budget: list[int]) -> dict[str, Any]:
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise TimeoutError
        try:
            line = await asyncio.wait_for(self.reader.readline(), remaining)
        except (ValueError, asyncio.LimitOverrunError):  # one line longer than the whole budget
            raise JobError("OutputLimitExceeded: the run produced more output than this server sends") from None
        if not line:
            await asyncio.to_thread(self.process.join, 5)
            code = self.process.exitcode
            raise JobError(f"WorkerDied: the worker process ended (exit code {code})")
        budget[0] -= len(line)
        if budget[0] < 0:
            raise JobError("OutputLimitExceeded: the run produced more output than this server sends")
        message: dict[str, Any] = json.loads(line)
        return message


_context: Any = None


def _fork_server() -> Any:
    """The multiprocessing context whose fork server has struckdown imported."""
    global _context
    if _context is None:
        import multiprocessing

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["struckdown.web.preload"])
        _context = context
    return _context


def _start_process(process: Any) -> None:
    """Start a worker without multiprocessing re-importing the host program's `__main__`
    in it (a script without a main guard would run again; pytest would be imported)."""
    import types

    with _MAIN_SWAP:
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            process.start()
        finally:
            sys.modules["__main__"] = main


_MAIN_SWAP = threading.Lock()


class WorkerPool:
    def __init__(self, limits: PoolLimits, *, shared: bool, env: dict[str, str] | None = None) -> None:
        self.limits = limits
        self.shared = shared
        self.env = env
        self._idle: list[_Worker] = []
        self._starting: asyncio.Task[_Worker] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._all: set[_Worker] = set()
        self._reapers: set[asyncio.Task[None]] = set()

    # -- processes -------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        if self.shared:
            env.pop("STRUCKDOWN_ALLOW_FETCH", None)
        return env

    async def _start(self) -> _Worker:
        from .worker import child_main

        ours, theirs = socket.socketpair()
        # the worker's temporary files (and, shared, its working directory) live here; the
        # server removes it when the worker is gone, killed or not
        folder = tempfile.mkdtemp(prefix="sd-worker-")
        process = _fork_server().Process(
            target=child_main,
            args=(theirs, self.limits.memory_mb, self.shared, self._environment(), folder),
            daemon=True,
            name="struckdown-web-worker",
        )
        try:
            await asyncio.to_thread(_start_process, process)  # the first start waits for the fork server's imports
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        finally:
            theirs.close()
        reader, writer = await asyncio.open_connection(sock=ours, limit=self.limits.output_bytes + 1024)
        worker = _Worker(process, reader, writer, folder)
        self._all.add(worker)
        try:
            loop = asyncio.get_running_loop()
            ready = await worker.read(loop.time() + START_TIMEOUT_S, [1 << 20])
        except BaseException:
            self._retire(worker)
            raise
        if ready.get("type") != "_ready":
            self._retire(worker)
            raise JobError(f"WorkerDied: the worker did not start ({ready})")
        return worker

    def warm(self) -> None:
        """Have one spare worker starting, if none is idle or on its way."""
        if self._idle or (self._starting is not None and not self._starting.done()):
            return
        self._starting = asyncio.get_running_loop().create_task(self._start())

    async def _take(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                self.warm()
                return worker
        starting, self._starting = self._starting, None
        worker = await (starting if starting is not None else self._start())
        self.warm()
        return worker

    def _give_back(self, worker: _Worker) -> None:
        worker.jobs += 1
        if worker.alive and worker.jobs < JOBS_PER_WORKER:
            self._idle.append(worker)
        else:
            self._retire(worker)

    def _retire(self, worker: _Worker) -> None:
        worker.kill()
        self._all.discard(worker)
        reaper = asyncio.get_running_loop().create_task(self._reap(worker))
        self._reapers.add(reaper)
        reaper.add_done_callback(self._reapers.discard)

    @staticmethod
    async def _reap(worker: _Worker) -> None:
        """Wait for the process and close its socket, so nothing is left to the garbage collector."""
        worker.writer.close()
        with contextlib.suppress(Exception):
            await worker.writer.wait_closed()
        await asyncio.to_thread(worker.process.join, 10)
        if worker.folder is not None:
            await asyncio.to_thread(shutil.rmtree, worker.folder, True)

    async def close(self) -> None:
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(BaseException):
                await self._starting
        for worker in list(self._all):
            self._retire(worker)
        self._idle.clear()
        while self._reapers:
            await asyncio.gather(*self._reapers, return_exceptions=True)

    # -- jobs ------------------------------------------------------------------------
    async def stream(self, job: dict[str, Any], *, time_limit_s: float | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """The messages of one job. A job the server ends yields a final
        `processing_error` saying why; the generator being closed early (the client
        left) kills the worker."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.workers)
        try:
            await asyncio.wait_for(self._slots.acquire(), self.limits.queue_timeout_s)
        except TimeoutError:
            yield {"type": "processing_error", "slot": None, "error": "Busy: every worker is taken; try again"}
            return
        worker: _Worker | None = None
        clean = False
        try:
            try:
                worker = await self._take()
                await worker.send(job)
            except (JobError, OSError, TimeoutError) as exc:
                yield {"type": "processing_error", "slot": None, "error": f"WorkerDied: no worker for the job ({exc})"}
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + (time_limit_s or self.limits.time_limit_s)  # the job's own time
            budget = [self.limits.output_bytes]
            while True:
                try:
                    message = await worker.read(deadline, budget)
                except TimeoutError:
                    limit = time_limit_s or self.limits.time_limit_s
                    yield {"type": "processing_error", "slot": None,
                           "error": f"TimeLimitExceeded: the request ran longer than {limit:g} s"}
                    return
                except JobError as exc:
                    yield {"type": "processing_error", "slot": None, "error": str(exc)}
                    return
                if message.get("type") == "_end":
                    clean = True
                    return
                yield message
        finally:
            if worker is not None:
                if clean:
                    self._give_back(worker)
                else:
                    self._retire(worker)
            self._slots.release()

    async def one(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """Every message of a short job (check, explain)."""
        return [message async for message in self.stream(job)]
