"""Parsing: template text → AST (one Lark grammar)."""

from .nodes import Template
from .parser import grammar_path, parse_template

__all__ = ["Template", "grammar_path", "parse_template"]
