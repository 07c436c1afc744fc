"""A response cache object of the caller's own (the `ResponseCache` protocol: `aget`/`aput`), in memory."""

from __future__ import annotations

from typing import Any


class MemoryCache:
    def __init__(self) -> None:
        self.items: dict[str, Any] = {}
        self.gets = 0

    async def aget(self, key: str) -> Any:
        self.gets += 1
        return self.items.get(key)

    async def aput(self, key: str, value: Any) -> None:
        self.items[key] = value
