"""Model resolution on the default Environment (the store every test starts afresh)."""

from __future__ import annotations

from typing import Any

import struckdown as sd
from struckdown import models


def resolve_model(model: Any) -> Any:
    return models.resolve_model(model, sd.default_environment().models)


def openai_compatible(*args: Any, **kwargs: Any) -> Any:
    return models.openai_compatible(*args, store=sd.default_environment().models, **kwargs)


def clear_model_cache() -> None:
    sd.default_environment().models.clear()
