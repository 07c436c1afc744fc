"""Each builtin type's default sampling temperature (SPEC §11, as 0.x had them).

Constrained answers (a choice, a number, a date, JSON, a guard verdict, verbatim
text) default to 0.0, reasoning to 0.5, ordinary answers to 0.7, spoken ones to 0.8
and poems to 1.5. The run uses one only when neither the slot nor the caller (the
call's or the Environment's settings, or the model's own settings) gives a
temperature, and never for a model that refuses one (`models.accepts_temperature`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .table import TYPES

if TYPE_CHECKING:
    from .registry import TypeRegistry

DEFAULT_TEMPERATURES: Mapping[str, float] = {
    t.name: t.temperature for t in TYPES.values() if t.temperature is not None
}  # table.py's rows


def default_temperature(type_name: str, registry: TypeRegistry | None = None) -> float | None:
    """The temperature a slot of this type runs at unless someone sets one; a preset of a
    builtin has its base's, any other custom type none (the model's own default)."""
    if type_name in DEFAULT_TEMPERATURES:
        return DEFAULT_TEMPERATURES[type_name]
    entry = registry.custom(type_name) if registry is not None else None
    if entry is not None and "temperature" in entry.settings:
        return float(entry.settings["temperature"])
    if entry is not None and entry.kind == "preset":
        return DEFAULT_TEMPERATURES.get(entry.target)
    return None


def type_settings(type_name: str, registry: TypeRegistry | None = None) -> Mapping[str, object]:
    """A custom type's own default settings besides temperature (a 0.x `llm_config:`)."""
    entry = registry.custom(type_name) if registry is not None and type_name not in DEFAULT_TEMPERATURES else None
    if entry is None:
        return {}
    return {k: v for k, v in entry.settings.items() if k != "temperature"}
