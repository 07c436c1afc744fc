"""Slot types: what a ``[[type:name|options]]`` slot asks the model for.

:func:`build_output` turns a parsed slot (:class:`TypeRequest`) into an
:class:`OutputSpec`: the ``output_type`` handed to pydantic-ai, the JSON schema
of the answer, and the conversion to a plain Python value. Custom types live in
a :class:`TypeRegistry` (see ``docs/types.md``).
"""

from .build import build_output
from .builtin import BUILTIN_TYPES, HaltVerdict
from .registry import (
    TypeFactory,
    TypeRegistry,
    allowed_type_options,
    takes_positional,
)
from .spec import OPTION_NAMES, OutputSpec, TypeBuildError, TypeRequest

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
