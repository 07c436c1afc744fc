"""Sandboxed Jinja: text is compiled once per Program and rendered when reached.

Rendered output is never parsed again (SPEC §1): values interpolated into text are
opaque and can never become structure.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _tojson(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _make_env() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        undefined=jinja2.Undefined, autoescape=False, keep_trailing_newline=True
    )
    env.filters["tojson"] = _tojson
    return env


ENV = _make_env()


@lru_cache(maxsize=4096)
def compile_text(source: str) -> jinja2.Template:
    return ENV.from_string(source)


@lru_cache(maxsize=4096)
def compile_expression(source: str) -> Any:
    return ENV.compile_expression(source, undefined_to_none=True)


@lru_cache(maxsize=4096)
def referenced_names(source: str) -> frozenset[str]:
    """Variables a piece of Jinja source reads from its context (decided from the AST)."""
    return frozenset(meta.find_undeclared_variables(ENV.parse(source)))


def expression_names(expression: str) -> frozenset[str]:
    return referenced_names("{{ " + expression + " }}")


def render_text(source: str, variables: Mapping[str, Any]) -> str:
    return compile_text(source).render(variables)


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    return compile_expression(expression)(**variables)


def as_text(value: Any) -> str:
    """How an answer reads when it becomes an assistant turn or prompt text."""
    if isinstance(value, str):
        return value
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return str(value)
    if hasattr(value, "model_dump_json"):
        return str(value.model_dump_json())
    return json.dumps(value, default=str, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Plain JSON-ready data for outputs, events and the CLI."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, _dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if hasattr(value, "model_dump"):
        return jsonable(value.model_dump(mode="json"))
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)
