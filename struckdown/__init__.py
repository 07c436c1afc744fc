"""struckdown: markdown templates whose [[slots]] language models fill in order.

The public names are loaded on first use (PEP 562), so `import struckdown` and
`sd --help` stay fast; `struckdown.complete` imports pydantic-ai when it is needed.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ._version import __version__

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
    "BudgetExceeded": "errors",
    "Halted": "errors",
    "SlotError": "errors",
    "StruckdownError": "errors",
    "TemplateRuntimeError": "errors",
    "TemplateSyntaxError": "errors",
    "ToolLimitExceeded": "run.tools",
    "BadModelOutput": "run.tools",
    "ModelError": "models.errors",
    "RateLimitError": "models.errors",
    "AuthenticationError": "models.errors",
    "ContextWindowError": "models.errors",
    "ContentFilterError": "models.errors",
    "ModelConnectionError": "models.errors",
    "BadRequestError": "models.errors",
    "TruncatedError": "models.errors",
    "Result": "results",
    "RerunReport": "results",
    "SlotResult": "results",
    "ToolCall": "results",
    "Usage": "results",
    "readonly": "tools",
    "trusted": "tools",
    "receives": "tools",
    "Private": "labels",
    "Untrusted": "labels",
    "FlowError": "errors",
    "sequential": "tools",
    "Safe": "compat.safe",
    "ProviderBatch": "batch.provider",
    "BatchCounts": "batch.provider",
    "MCPServerError": "errors",
    "MCPSessions": "tools.mcp",
    "resume": "api",
    "resume_async": "api",
    "resume_incremental_async": "api",
    "Paused": "errors",
    "OutcomeUnknown": "errors",
    "Happened": "approval.state",
    "ApprovalRequest": "approval.state",
    "needs_approval": "tools",
    "effect": "tools",
    "Image": "media",
    "File": "media",
    "attach": "media",
    "MediaError": "errors",
    # struckdown 0.x's names (SPEC §11)
    "StruckdownResult": "compat.calls",
    "TemplateError": "compat.calls",
    "LLMError": "compat.calls",
    "OnHalt": "run_options",
    "LLMCredentials": "models",
    "make_search": "actions.search",
    "evaluate": "eval",
    "EvalReport": "eval",
    "ACTION_LOOKUP": "api",
    "Actions": "api",
    "CostSummary": "compat.names",
    "LLMConfig": "compat.names",
    "ParsedOptions": "compat.names",
    "escape_context_dict": "compat.names",
    "escape_struckdown_syntax": "compat.names",
    "mark_struckdown_safe": "compat.names",
    "parse_options": "compat.names",
    "CheckpointReached": "incremental",
    "IncrementalEvent": "incremental",
    "ProcessingComplete": "incremental",
    "ProcessingError": "incremental",
    "SlotCompleted": "incremental",
    "SlotRetracted": "incremental",
    "ThinkingDelta": "incremental",
    "SlotPartial": "incremental",
}

__all__ = sorted([*_EXPORTS, "__version__"])
_DEPRECATED = frozenset({"LLM"})  # 0.x names that still import, with a DeprecationWarning


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None and name in _DEPRECATED:  # importable, with a DeprecationWarning each time
        from .compat.names import DEPRECATED
        from .notices import warn

        if "importlib" not in sys._getframe(1).f_code.co_filename:  # not `from … import`'s own hasattr probe
            warn(DEPRECATED[name], DeprecationWarning)
        return getattr(import_module(".compat.names", __name__), name)
    if module is None:
        raise AttributeError(f"module 'struckdown' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from .actions.search import make_search as make_search
    from .api import ACTION_LOOKUP as ACTION_LOOKUP
    from .api import Actions as Actions
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
    from .api import resume as resume
    from .api import resume_async as resume_async
    from .api import resume_incremental_async as resume_incremental_async
    from .approval.state import ApprovalRequest as ApprovalRequest
    from .approval.state import Happened as Happened
    from .batch.provider import BatchCounts as BatchCounts
    from .batch.provider import ProviderBatch as ProviderBatch
    from .compat.calls import LLMError as LLMError
    from .compat.calls import StruckdownResult as StruckdownResult
    from .compat.calls import TemplateError as TemplateError
    from .compat.names import CostSummary as CostSummary
    from .compat.names import LLMConfig as LLMConfig
    from .compat.names import ParsedOptions as ParsedOptions
    from .compat.names import escape_context_dict as escape_context_dict
    from .compat.names import escape_struckdown_syntax as escape_struckdown_syntax
    from .compat.names import mark_struckdown_safe as mark_struckdown_safe
    from .compat.names import parse_options as parse_options
    from .compat.safe import Safe as Safe
    from .environment import Environment as Environment
    from .environment import default_environment as default_environment
    from .errors import (
        BudgetExceeded as BudgetExceeded,
    )
    from .errors import (
        ConfigurationError as ConfigurationError,
    )
    from .errors import FlowError as FlowError
    from .errors import (
        Halted as Halted,
    )
    from .errors import MCPServerError as MCPServerError
    from .errors import MediaError as MediaError
    from .errors import OutcomeUnknown as OutcomeUnknown
    from .errors import Paused as Paused
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
    from .eval import EvalReport as EvalReport
    from .eval import evaluate as evaluate
    from .incremental import CheckpointReached as CheckpointReached
    from .incremental import IncrementalEvent as IncrementalEvent
    from .incremental import ProcessingComplete as ProcessingComplete
    from .incremental import ProcessingError as ProcessingError
    from .incremental import SlotCompleted as SlotCompleted
    from .incremental import SlotPartial as SlotPartial
    from .incremental import SlotRetracted as SlotRetracted
    from .incremental import ThinkingDelta as ThinkingDelta
    from .labels import Private as Private
    from .labels import Untrusted as Untrusted
    from .media import File as File
    from .media import Image as Image
    from .media import attach as attach
    from .models import LLMCredentials as LLMCredentials
    from .models.errors import (
        AuthenticationError as AuthenticationError,
    )
    from .models.errors import (
        BadRequestError as BadRequestError,
    )
    from .models.errors import (
        ContentFilterError as ContentFilterError,
    )
    from .models.errors import (
        ContextWindowError as ContextWindowError,
    )
    from .models.errors import (
        ModelConnectionError as ModelConnectionError,
    )
    from .models.errors import (
        ModelError as ModelError,
    )
    from .models.errors import (
        RateLimitError as RateLimitError,
    )
    from .models.errors import (
        TruncatedError as TruncatedError,
    )
    from .plan import Program as Program
    from .results import RerunReport as RerunReport
    from .results import Result as Result
    from .results import SlotResult as SlotResult
    from .results import ToolCall as ToolCall
    from .results import Usage as Usage
    from .run.tools import BadModelOutput as BadModelOutput
    from .run.tools import ToolLimitExceeded as ToolLimitExceeded
    from .run_options import OnHalt as OnHalt
    from .tools import effect as effect
    from .tools import needs_approval as needs_approval
    from .tools import readonly as readonly
    from .tools import receives as receives
    from .tools import sequential as sequential
    from .tools import trusted as trusted
    from .tools.mcp import MCPSessions as MCPSessions
