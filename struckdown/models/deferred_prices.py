"""genai-prices' data, loaded when a price is looked up instead of when a model is built.

pydantic-ai loads genai-prices' bundled data (`genai_prices.data`: some 3,000 model
records) in every `Model.__init__` (`_genai_prices.preload_pricing_data`), so that the
one-time cost falls outside the event loop. A run of the test model (`--model test`, a
dry run) never needs a price: every lookup pydantic-ai makes for it (the context window
in `Model.profile`, a response's cost) asks for provider `test`, which genai-prices does
not know. Loading the data was a twentieth of `sd run --model test` (SPEC §28).

`defer()` installs `DeferredSnapshot` as genai-prices' snapshot when nothing else is
installed and the data is not loaded yet. It answers lookups for the providers in
`UNPRICED` as the data would (`LookupError`) without loading it; any other lookup loads
the data, uninstalls the deferred snapshot (genai-prices' own bundled one is used from
then on) and answers from the data. So prices are never hidden; only the moment of the
load moves: a real model built later in the same process loads the data at its first
priced response instead of at construction. A snapshot someone installed
(`UpdatePrices`, `set_custom_snapshot`) is left alone, and replaces the deferred one when
installed later.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from genai_prices import data_snapshot
from genai_prices.data_snapshot import DataSnapshot

#: provider ids no genai-prices provider matches (tests/run/test_deferred_prices.py checks
#: them against the data): pydantic-ai's TestModel and FunctionModel
UNPRICED = frozenset({"test", "function"})

_lock = threading.Lock()


class DeferredSnapshot(DataSnapshot):
    """genai-prices' bundled snapshot whose data loads on first use (see the module)."""

    def __init__(self) -> None:
        super().__init__(providers=[], from_auto_update=False)

    @property  # replaces the field of DataSnapshot
    def providers(self) -> list[Any]:
        from genai_prices.data import providers

        with _lock:
            if _installed() is self:
                data_snapshot.set_custom_snapshot(None)
        return providers

    @providers.setter
    def providers(self, value: list[Any]) -> None:
        pass  # DataSnapshot.__init__ sets it: the data comes from the property

    def find_provider(self, model_ref: str | None, provider_id: str | None, provider_api_url: str | None) -> Any:
        if provider_api_url is None and provider_id is not None and provider_id.lower().strip() in UNPRICED:
            if "genai_prices.data" not in sys.modules:
                raise LookupError(f"Unable to find provider {provider_id=!r}")  # genai-prices' own words
        return super().find_provider(model_ref, provider_id, provider_api_url)


def defer() -> None:
    """Install a `DeferredSnapshot` unless a snapshot is installed or the data is loaded."""
    with _lock:
        if _installed() is None and "genai_prices.data" not in sys.modules:
            data_snapshot.set_custom_snapshot(DeferredSnapshot())


def _installed() -> Any:
    """The snapshot installed in genai-prices (a module global of data_snapshot.py); a
    version without that global gets nothing deferred (`...` is never None)."""
    return getattr(data_snapshot, "_custom_snapshot", ...)
