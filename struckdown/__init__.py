"""struckdown: markdown templates whose [[slots]] language models fill in order.

The public names are loaded on first use (PEP 562), so `import struckdown` and
`sd --help` stay fast; `struckdown.complete` imports pydantic-ai when it is needed.
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import TYPE_CHECKING, Any

logging.getLogger("struckdown").addHandler(logging.NullHandler())

__version__ = "0.1.0"

_EXPORTS = {
    "complete": "api",
    "complete_async": "api",
    "complete_batch": "api",
    "complete_batch_async": "api",
    "complete_incremental": "api",
    "complete_incremental_async": "api",
    "parse": "api",
    "register_action": "api",
    "register_type": "api",
    "load_type_file": "api",
    "Environment": "environment",
    "default_environment": "environment",
    "Program": "plan",
    "ConfigurationError": "errors",
    "Halted": "errors",
    "SlotError": "errors",
    "StruckdownError": "errors",
    "TemplateRuntimeError": "errors",
    "TemplateSyntaxError": "errors",
    "ToolLimitExceeded": "run.tools",
    "ModelError": "model_errors",
    "RateLimitError": "model_errors",
    "AuthenticationError": "model_errors",
    "ContextWindowError": "model_errors",
    "ContentFilterError": "model_errors",
    "ModelConnectionError": "model_errors",
    "BadRequestError": "model_errors",
    "Result": "results",
    "SlotResult": "results",
    "ToolCall": "results",
    "Usage": "results",
    "readonly": "run.tools",
    "Safe": "safe",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'struckdown' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .api import (
        complete,
        complete_async,
        complete_batch,
        complete_batch_async,
        complete_incremental,
        complete_incremental_async,
        load_type_file,
        parse,
        register_action,
        register_type,
    )
    from .environment import Environment, default_environment
    from .errors import (
        ConfigurationError,
        Halted,
        SlotError,
        StruckdownError,
        TemplateRuntimeError,
        TemplateSyntaxError,
    )
    from .model_errors import (
        AuthenticationError,
        BadRequestError,
        ContentFilterError,
        ContextWindowError,
        ModelConnectionError,
        ModelError,
        RateLimitError,
    )
    from .plan import Program
    from .results import Result, SlotResult, ToolCall, Usage
    from .run.tools import ToolLimitExceeded, readonly
    from .safe import Safe
