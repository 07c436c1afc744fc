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
    "complete_batch_iter_async": "api",
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
    "BadModelOutput": "run.tools",
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
        complete as complete,
    )
    from .api import (
        complete_async as complete_async,
    )
    from .api import (
        complete_batch as complete_batch,
    )
    from .api import (
        complete_batch_async as complete_batch_async,
    )
    from .api import (
        complete_batch_iter_async as complete_batch_iter_async,
    )
    from .api import (
        complete_incremental as complete_incremental,
    )
    from .api import (
        complete_incremental_async as complete_incremental_async,
    )
    from .api import (
        load_type_file as load_type_file,
    )
    from .api import (
        parse as parse,
    )
    from .api import (
        register_action as register_action,
    )
    from .api import (
        register_type as register_type,
    )
    from .environment import Environment as Environment
    from .environment import default_environment as default_environment
    from .errors import (
        ConfigurationError as ConfigurationError,
    )
    from .errors import (
        Halted as Halted,
    )
    from .errors import (
        SlotError as SlotError,
    )
    from .errors import (
        StruckdownError as StruckdownError,
    )
    from .errors import (
        TemplateRuntimeError as TemplateRuntimeError,
    )
    from .errors import (
        TemplateSyntaxError as TemplateSyntaxError,
    )
    from .model_errors import (
        AuthenticationError as AuthenticationError,
    )
    from .model_errors import (
        BadRequestError as BadRequestError,
    )
    from .model_errors import (
        ContentFilterError as ContentFilterError,
    )
    from .model_errors import (
        ContextWindowError as ContextWindowError,
    )
    from .model_errors import (
        ModelConnectionError as ModelConnectionError,
    )
    from .model_errors import (
        ModelError as ModelError,
    )
    from .model_errors import (
        RateLimitError as RateLimitError,
    )
    from .plan import Program as Program
    from .results import Result as Result
    from .results import SlotResult as SlotResult
    from .results import ToolCall as ToolCall
    from .results import Usage as Usage
    from .run.tools import BadModelOutput as BadModelOutput
    from .run.tools import ToolLimitExceeded as ToolLimitExceeded
    from .run.tools import readonly as readonly
    from .safe import Safe as Safe
