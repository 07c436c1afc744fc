"""A small thread-safe least-recently-used map: the bounded caches of an Environment
(Programs, built output types) use it, so data-driven keys can never grow one without bound."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class LRU(Generic[V]):
    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V, *, replace: bool = False) -> V:
        """Store `value`; without `replace`, a value another thread stored first wins
        (and is returned), so racing builders end up sharing one object."""
        with self._lock:
            existing = self._items.get(key)
            if existing is not None and not replace:
                return existing
            self._items[key] = value
            self._items.move_to_end(key)
            if len(self._items) > self._size:
                self._items.popitem(last=False)
            return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
