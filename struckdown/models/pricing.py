"""Cost in money (SPEC §13): the price of one model response, in USD.

The caller's `prices=` (USD per million tokens) come first, keyed by the model name
pydantic-ai reports (`ModelResponse.model_name`) or by `provider:name`, the latter
winning; otherwise the price data of `genai-prices` (pydantic's maintained package,
which pydantic-ai itself depends on). A price nobody knows is `None`, never a guess.

Imports nothing heavy at module level: `genai_prices` loads on the first lookup.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

#: The rates a `prices=` entry may give, USD per million tokens.
RATE_KEYS = ("input", "output", "cache_read", "cache_write")
_MILLION = Decimal(1_000_000)


class Rates:
    """One model's prices, USD per million tokens."""

    __slots__ = ("input", "output", "cache_read", "cache_write")

    def __init__(
        self, input: Decimal, output: Decimal, cache_read: Decimal | None, cache_write: Decimal | None = None
    ) -> None:
        self.input, self.output, self.cache_read, self.cache_write = input, output, cache_read, cache_write

    def cost(self, usage: Any) -> Decimal:
        """The price of a pydantic-ai `RequestUsage` (whose input tokens include the cached
        ones); cache reads and writes at their own rates when given, else at the input rate."""
        input_tokens = int(usage.input_tokens or 0)
        output_tokens = int(usage.output_tokens or 0)
        total = self.output * output_tokens
        plain = input_tokens
        for count, rate in (
            (int(getattr(usage, "cache_read_tokens", 0) or 0), self.cache_read),
            (int(getattr(usage, "cache_write_tokens", 0) or 0), self.cache_write),
        ):
            if rate is not None and 0 < count <= plain:
                total += rate * count
                plain -= count
        return (total + self.input * plain) / _MILLION


def _rate(model: str, key: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ConfigurationError(f"prices[{model!r}][{key!r}] must be a number (USD per million tokens), not {value!r}")
    try:
        rate = Decimal(str(value))
    except ArithmeticError:
        raise ConfigurationError(f"prices[{model!r}][{key!r}] must be a number, not {value!r}") from None
    if not rate.is_finite() or rate < 0:
        raise ConfigurationError(f"prices[{model!r}][{key!r}] must be a non-negative number, not {value!r}")
    return rate


def parse_prices(prices: Mapping[str, Any] | None) -> dict[str, Rates]:
    """`{"model": {"input": 0.15, "output": 0.60}}` as Rates; a bad entry is a ConfigurationError."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise ConfigurationError(f"prices= must be a mapping of model name to rates, not {type(prices).__name__}")
    table: dict[str, Rates] = {}
    for name, entry in prices.items():
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"prices= keys are model names (or provider:name), not {name!r}")
        if not isinstance(entry, Mapping):
            raise ConfigurationError(
                f"prices[{name!r}] must be {{'input': USD, 'output': USD}} per million tokens, not {entry!r}"
            )
        unknown = sorted(set(entry) - set(RATE_KEYS))
        if unknown:
            raise ConfigurationError(
                f"prices[{name!r}]: unknown rate {', '.join(map(repr, unknown))}; use {', '.join(RATE_KEYS)}"
            )
        if "input" not in entry or "output" not in entry:
            raise ConfigurationError(f"prices[{name!r}] needs both 'input' and 'output' (USD per million tokens)")
        cache_read, cache_write = entry.get("cache_read"), entry.get("cache_write")
        table[name] = Rates(
            _rate(name, "input", entry["input"]),
            _rate(name, "output", entry["output"]),
            None if cache_read is None else _rate(name, "cache_read", cache_read),
            None if cache_write is None else _rate(name, "cache_write", cache_write),
        )
    return table


def load_prices_file(path: str | Path) -> dict[str, Any]:
    """A `--prices FILE` (JSON or YAML) as the mapping `prices=` takes."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read prices file {file}: {exc.strerror or exc}") from None
    try:
        if file.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is the file's fault
        raise ConfigurationError(f"prices file {file} is not valid {file.suffix.lstrip('.') or 'JSON'}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"prices file {file} must hold a mapping of model name to {{input, output}} rates")
    parse_prices(data)  # fail now, with the file's name in the message
    return data


class Pricing:
    """Prices one response at a time: the caller's table, then genai-prices."""

    def __init__(self, prices: Mapping[str, Any] | None = None) -> None:
        self.table = parse_prices(prices)
        self._unknown: set[tuple[str, str | None, str | None]] = set()
        self._unpriced: set[tuple[Any, ...]] = set()
        self._lock = threading.Lock()

    def cost(self, response: Any, model: Any) -> float | None:
        """USD for one `ModelResponse` from `model` (the provider model), or None when unknown."""
        fast = (response.model_name, response.provider_name, response.provider_url, id(model))
        if fast in self._unpriced:  # the hot path of a model nobody prices: one lookup
            return None
        price = self._cost(response, model, response.usage)
        if price is None and len(self._unpriced) < 1024:
            self._unpriced.add(fast)  # a later response of the same model is unknown too
        return price

    def saving(self, response: Any, model: Any, cost: float | None) -> float | None:
        """What the provider's prompt cache saved on one response (SPEC §24): its price with
        every cached token as plain input, less `cost` (its price). None: no cache tokens or
        no price; negative when writing the cache cost more than reading saved."""
        usage = response.usage
        if cost is None or not (getattr(usage, "cache_read_tokens", 0) or getattr(usage, "cache_write_tokens", 0)):
            return None
        from dataclasses import replace

        plain = replace(
            usage, cache_read_tokens=0, cache_write_tokens=0, cache_write_1h_tokens=0, cache_audio_read_tokens=0,
            cost=None,
        )
        uncached = self._cost(response, model, plain)
        return None if uncached is None else uncached - cost

    def _cost(self, response: Any, model: Any, usage: Any) -> float | None:
        names = _names(response.model_name, getattr(model, "model_name", None))
        providers = _names(response.provider_name, getattr(model, "system", None))
        rates = self._from_table(names, providers)
        if rates is not None:
            return float(rates.cost(usage))
        url = response.provider_url or _base_url(model)
        for name in names:
            price = self._catalogue(usage, name, providers, url, response.timestamp)
            if price is not None:
                return price
        return None

    def of_usage(self, usage: Any, name: str, provider: str | None = None) -> float | None:
        """USD for a `RequestUsage` of the model `name` (of `provider`), or None when unknown:
        what `sd explain --cache` prices a predicted batch with."""
        providers = [provider] if provider else []
        rates = self._from_table([name], providers)
        if rates is not None:
            return float(rates.cost(usage))
        return self._catalogue(usage, name, providers, None, None)

    def knows(self, model: Any) -> bool:
        """Whether a response of `model` can be priced (checked before a run with `max_cost`)."""
        names = _names(getattr(model, "model_name", None))
        providers = _names(getattr(model, "system", None))
        if self._from_table(names, providers) is not None:
            return True
        from pydantic_ai.usage import RequestUsage

        url = _base_url(model)
        return any(self._catalogue(RequestUsage(), name, providers, url, None) is not None for name in names)

    def _from_table(self, names: list[str], providers: list[str]) -> Rates | None:
        if not self.table:
            return None
        for name in names:
            for provider in providers:
                rates = self.table.get(f"{provider}:{name}")
                if rates is not None:
                    return rates
        for name in names:
            rates = self.table.get(name)
            if rates is not None:
                return rates
        return None

    def _catalogue(self, usage: Any, name: str, providers: list[str], url: str | None, when: Any) -> float | None:
        """genai-prices, by the endpoint's URL first, then by provider id (as pydantic-ai looks up)."""
        key = (name, providers[0] if providers else None, url)
        if key in self._unknown:
            return None
        from genai_prices import calc_price

        references: list[dict[str, Any]] = []
        if url:
            references.append({"provider_api_url": url})
        references += [{"provider_id": p} for p in providers]
        only_lookups = True
        for reference in references:
            try:
                price = calc_price(usage, name, genai_request_timestamp=when, **reference)
            except LookupError:
                continue
            except ValueError:  # usage it cannot price (not the model's fault): not remembered
                only_lookups = False
                continue
            total = float(price.total_price)
            if math.isfinite(total):
                return total
        if only_lookups:
            with self._lock:
                self._unknown.add(key)
        return None


def _names(*candidates: Any) -> list[str]:
    out: list[str] = []
    for candidate in candidates:
        if isinstance(candidate, str) and candidate and candidate not in out:
            out.append(candidate)
    return out


def _base_url(model: Any) -> str | None:
    try:
        url = getattr(model, "base_url", None)
    except Exception:  # noqa: BLE001 - some providers build their client lazily
        return None
    return url if isinstance(url, str) and url else None


def format_cost(cost: float | None) -> str | None:
    """`$0.0123` for the CLI summary line; None when the cost is unknown."""
    if cost is None:
        return None
    if cost == 0:
        return "$0"
    if cost < 0.01:
        text = f"{cost:.6f}".rstrip("0").rstrip(".")
        return "<$0.000001" if text == "0" else f"${text}"
    return f"${cost:,.4f}"
