"""The models an Environment built from strings, and the run settings each one gets.

A batch resolves the same model string thousands of times; the store builds one
client for it. Models built here get struckdown's retry budget (and timeout) as
*run* settings under the caller's own (`defaults(model)`), never by writing to the
model: a `Model` object is pydantic-ai's, configured only through its constructor.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from types import MappingProxyType
from typing import Any

_SIZE = 64
_NONE: Mapping[str, Any] = MappingProxyType({})


class ModelStore:
    def __init__(self, size: int = _SIZE) -> None:
        self._size = size
        self._models: OrderedDict[Hashable, Any] = OrderedDict()
        self._defaults: dict[int, tuple[Any, Mapping[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(
        self, key: Hashable, make: Callable[[], Any], defaults: Callable[[Any], Mapping[str, Any]] | None = None
    ) -> Any:
        """The model built for `key` (made now if there is none); `defaults(model)` gives
        the run settings a newly built model gets."""
        with self._lock:
            model = self._models.get(key)
            if model is not None:
                self._models.move_to_end(key)
                return model
        model = make()  # outside the lock: building may import a provider SDK
        with self._lock:
            held = self._models.setdefault(key, model)
            if held is model and defaults is not None:
                self._defaults[id(model)] = (model, MappingProxyType(dict(defaults(model))))
            while len(self._models) > self._size:
                _, dropped = self._models.popitem(last=False)
                self._defaults.pop(id(dropped), None)
            return held

    def defaults(self, model: Any) -> Mapping[str, Any]:
        """The run settings struckdown gives `model` (empty for a Model it did not build)."""
        held = self._defaults.get(id(model))
        return held[1] if held is not None and held[0] is model else _NONE

    def clear(self) -> None:
        with self._lock:
            self._models.clear()
            self._defaults.clear()
