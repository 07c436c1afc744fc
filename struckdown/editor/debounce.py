"""Coalescing: a burst of edits to one document becomes one diagnostics run.

Each `touch(key)` (re)starts the key's timer; when it runs out, `run(key)` is called
once, on the latest text. `flush` runs at once (open, save); `drop` forgets (close).
`settled(key)` waits until no run is pending, so a request that needs the same
analysis (semantic tokens) is answered from that one run instead of starting its own.

The timers are injectable: the server uses its event loop's `call_later`; tests pass
timers they fire themselves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Handle(Protocol):
    def cancel(self) -> None: ...


class Timers(Protocol):
    def call_later(self, delay: float, callback: Callable[[], object]) -> Handle: ...


class Debouncer:
    def __init__(self, delay: float, run: Callable[[str], None], timers: Callable[[], Timers]) -> None:
        self.delay = delay
        self.run = run
        self.timers = timers
        self.pending: dict[str, Handle] = {}
        self.waiters: dict[str, list[asyncio.Future[None]]] = {}

    def touch(self, key: str) -> None:
        old = self.pending.pop(key, None)
        if old is not None:
            old.cancel()
        self.pending[key] = self.timers().call_later(self.delay, lambda: self._fire(key))

    def flush(self, key: str) -> None:
        old = self.pending.pop(key, None)
        if old is not None:
            old.cancel()
        self._fire(key)

    def drop(self, key: str) -> None:
        old = self.pending.pop(key, None)
        if old is not None:
            old.cancel()
        self._release(key)

    async def settled(self, key: str) -> None:
        if key not in self.pending:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.setdefault(key, []).append(waiter)
        await waiter

    def _fire(self, key: str) -> None:
        self.pending.pop(key, None)
        try:
            self.run(key)
        finally:
            self._release(key)

    def _release(self, key: str) -> None:
        for waiter in self.waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(None)
