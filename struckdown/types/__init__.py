"""Slot types: what a ``[[type:name|options]]`` slot asks the model for.

:func:`build_output` turns a parsed slot (:class:`TypeRequest`) into an
:class:`OutputSpec`: the ``output_type`` handed to pydantic-ai, the JSON schema
of the answer, and the conversion to a plain Python value. Custom types live in
a :class:`TypeRegistry` (see ``docs/types.md``).

Importing the package imports no pydantic: the answer models are built by the
first slot that needs one (``HaltVerdict`` is loaded on first access).
"""

from typing import Any

from .output import build_output
from .registry import (
    TypeFactory,
    TypeRegistry,
    allowed_type_options,
    takes_positional,
)
from .spec import OPTION_NAMES, OutputSpec, TypeBuildError, TypeRequest
from .table import BUILTIN_TYPES

__all__ = [
    "BUILTIN_TYPES",
    "OPTION_NAMES",
    "HaltVerdict",
    "OutputSpec",
    "TypeBuildError",
    "TypeFactory",
    "TypeRegistry",
    "TypeRequest",
    "allowed_type_options",
    "build_output",
    "takes_positional",
]


def __getattr__(name: str) -> Any:
    if name == "HaltVerdict":  # a pydantic model: built on first use
        from .builtin import HaltVerdict

        return HaltVerdict
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
