"""Sandboxed Jinja: text is compiled once per Program and rendered when reached.

Rendered output is never parsed again (SPEC §1): values interpolated into text are
opaque and can never become structure. A `Renderer` is one sandbox with its
caches; each Environment owns one.

Jinja is imported when a Renderer first needs its sandbox, not with this module: text
whose only Jinja is `{{ name }}` (or `{{ name.attr }}`) is checked without it, so
`sd check` of such a template never loads Jinja (SPEC §28).
"""

from __future__ import annotations

import functools
import json
import keyword
import math
import re
import threading
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .media import Media, render_list

if TYPE_CHECKING:
    import jinja2
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

#: Largest string or list that `*` may build, and largest integer `**` may build (bits).
MAX_REPEAT = 1_000_000
MAX_POWER_BITS = 100_000
#: Most work one rendering of one piece of text may do: loop iterations plus calls
#: (functions and methods one step each, macros `MACRO_STEPS`). Nested loops and
#: recursive macros reach it within a second or two of CPU; a prompt built from more
#: loop steps than this would not fit a model's context anyway. The host may change it
#: (`struckdown.render.MAX_STEPS = …`, read at each rendering); a template cannot.
MAX_STEPS = 250_000
#: What one macro call counts for (a call of a macro costs as much as ~50 loop steps).
MACRO_STEPS = 50
#: Most paragraphs and words per paragraph `lipsum()` writes.
MAX_LIPSUM = 100, 1_000


class _Work(threading.local):
    """Steps left in the rendering running on this thread (rendering is synchronous)."""

    left = MAX_STEPS


_work = _Work()


def _tick(steps: int = 1) -> None:
    _work.left -= steps
    if _work.left < 0:
        from jinja2.exceptions import SecurityError

        raise SecurityError(
            f"the template did too much work: more than {MAX_STEPS:,} loop steps and calls in one rendering "
            "(nested loops or recursive macros?)"
        )


def _counted(iterable: Any) -> Any:
    """A loop's iterable, one step per item."""
    for item in iterable:
        _tick()
        yield item


_SIZED = (list, tuple, dict, set, frozenset, range)


def _counting_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that counts the items of the collection it is given as steps, so that
    `range(99999)|join` or `items|sum` inside a loop adds up like the loop would (strings
    are not counted: their filters are linear in the text and the text is the prompt)."""
    from jinja2.utils import _PassArg

    at = 0 if _PassArg.from_obj(function) is None else 1  # the context/environment comes first

    @functools.wraps(function)
    def counted(*args: Any, **kwargs: Any) -> Any:
        if len(args) > at and isinstance(args[at], _SIZED):
            _tick(len(args[at]))
        return function(*args, **kwargs)

    return counted


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # noqa: A002 - Jinja's names
    from jinja2.exceptions import SecurityError
    from jinja2.utils import generate_lorem_ipsum

    paragraphs, words = MAX_LIPSUM
    if n > paragraphs or max > words or min > words:
        raise SecurityError(f"lipsum() writes at most {paragraphs} paragraphs of at most {words:,} words")
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


def _finalize(value: Any) -> Any:
    """`{{ photos }}`: a list of images or files renders as each of them (a single one
    renders itself, through `str`); `None` renders as empty text, as in struckdown 0.18
    (an optional answer that came back null leaves no "None" in later text); anything
    else is left to `str` as before."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], Media):
        return render_list(value)
    return value


def _tojson(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# `{{ expr }}` with optional whitespace control; the grammar ends an expression at
# its first `}}` too, so this split agrees with how the template was tokenised.
_EXPRESSION = re.compile(r"\{\{[-+]?(.*?)[-+]?\}\}", re.S)

# `name`, `name.attr.attr`, `name | filter | filter`: by far the most common
# expressions; their one variable is read off without building a Jinja AST.
_SIMPLE = re.compile(r"\s*([A-Za-z_]\w*)((?:\s*\.\s*[A-Za-z_]\w*)*)((?:\s*\|\s*[A-Za-z_]\w*)*)\s*")
#: The sandbox's globals (Jinja's default namespace; our `lipsum` replaces Jinja's): a bare
#: `{{ name }}` that is none of them reads `name` from the context, known without Jinja.
#: tests/run/test_sandbox.py checks it against a built sandbox.
JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})
_NOT_NAMES = frozenset(keyword.kwlist) | {
    "true", "false", "none", "and", "or", "not", "in", "is", "if", "else", "elif", "endif", "for",
    "endfor", "block", "endblock", "extends", "include", "import", "macro", "call", "set", "with",
    "recursive", "filter", "raw", "endraw", "self",
}


class Renderer:
    """One sandbox and its caches: compiled texts and expressions, and the names
    each text or expression reads (what the check and plan stages ask)."""

    def __init__(self) -> None:
        self._sandbox: ImmutableSandboxedEnvironment | None = None
        # Per-instance caches: two environments never share a compiled template.
        self.compile_text = lru_cache(maxsize=16384)(self._compile_text)
        self.compile_expression = lru_cache(maxsize=4096)(self._compile_expression)
        self.referenced_names = lru_cache(maxsize=16384)(self._referenced_names)
        self.expression_names = lru_cache(maxsize=65536)(self._expression_names)

    @property
    def sandbox(self) -> ImmutableSandboxedEnvironment:
        """The Jinja sandbox, built (and Jinja imported) on first use."""
        if self._sandbox is None:
            with _BUILDING:  # two threads' first renders build one sandbox, not two
                if self._sandbox is None:
                    self._sandbox = _new_sandbox()
        return self._sandbox

    def clear(self) -> None:
        """Forget every compiled text and expression and every name analysis."""
        for cached in (self.compile_text, self.compile_expression, self.referenced_names, self.expression_names):
            cached.cache_clear()

    def _compile_text(self, source: str) -> jinja2.Template:
        """Compiled lazily, on first render: parsing only checks syntax and reads names."""
        return self.sandbox.from_string(source)

    def _compile_expression(self, source: str) -> Any:
        return self.sandbox.compile_expression(source, undefined_to_none=True)

    def _referenced_names(self, source: str) -> frozenset[str]:
        """Variables a piece of Jinja source reads from its context (decided from the AST).

        Also the syntax check: raises jinja2.TemplateSyntaxError for invalid Jinja.
        Text made only of data and `{{ … }}` is checked expression by expression
        (each cached: templates repeat the same few expressions); anything with
        `{% %}` or `{# #}` is parsed whole.
        """
        if "{" not in source:
            return frozenset()
        if "{%" not in source and "{#" not in source:
            try:
                names: frozenset[str] = frozenset()
                for expression in _EXPRESSION.findall(source):
                    names |= self.expression_names(expression)
                return names
            except jinja_syntax_error():
                pass  # parse the whole text so the error carries its real line
        tracker = _jinja_classes()[1](self.sandbox)
        tracker.visit(self.sandbox.parse(source))
        return frozenset(tracker.undeclared_identifiers)

    def _expression_names(self, expression: str) -> frozenset[str]:
        """The names one expression reads; also its syntax check (raises
        jinja2.TemplateSyntaxError). Checking parses only: the expression is compiled
        to Python when it is first evaluated."""
        simple = _SIMPLE.fullmatch(expression)
        if simple and simple.group(1) not in _NOT_NAMES:
            if self._sandbox is None and not simple.group(3) and simple.group(1) not in JINJA_GLOBALS:
                return frozenset({simple.group(1)})  # `name` / `name.attr`: no Jinja needed
            env = self.sandbox
            filters = re.findall(r"[A-Za-z_]\w*", simple.group(3))
            if simple.group(1) not in env.globals and all(name in env.filters for name in filters):
                return frozenset({simple.group(1)})
        from jinja2 import nodes

        env = self.sandbox
        parsed = nodes.Output([self._parse_expression(expression)])  # find_all skips the node it starts from
        # A lone expression binds nothing, so every loaded name is read from the context;
        # its filters and tests are checked as Jinja's compiler checks them.
        self._check_calls(parsed)
        return frozenset(
            name.name
            for name in parsed.find_all(nodes.Name)
            if name.ctx == "load" and name.name not in env.globals and name.name != "self"  # Jinja's template reference
        )

    def _check_calls(self, node: nodes.Node) -> None:
        """Unknown filters and tests fail, except inside an inline `… if … else …`, where
        Jinja's compiler lets them wait for the run (it may never take that branch)."""
        from jinja2 import nodes
        from jinja2.exceptions import TemplateAssertionError

        for child in node.iter_child_nodes():
            if isinstance(child, nodes.CondExpr):
                continue
            if isinstance(child, (nodes.Filter, nodes.Test)):
                is_filter = isinstance(child, nodes.Filter)
                kind, known = ("filter", self.sandbox.filters) if is_filter else ("test", self.sandbox.tests)
                if child.name not in known:
                    raise TemplateAssertionError(f"No {kind} named {child.name!r}.", child.lineno)
            self._check_calls(child)

    def _parse_expression(self, source: str) -> nodes.Expr:
        """One expression, read as `compile_expression` reads it (nothing may follow it)."""
        from jinja2.exceptions import TemplateSyntaxError
        from jinja2.parser import Parser

        parser = Parser(self.sandbox, source, state="variable")
        expression = parser.parse_expression()
        if not parser.stream.eos:
            raise TemplateSyntaxError("chunk after expression", parser.stream.current.lineno)
        expression.set_environment(self.sandbox)
        return expression

    def render_text(
        self,
        source: str,
        variables: Mapping[str, Any],
        compiled: dict[str, jinja2.Template] | None = None,
        exports: dict[str, Any] | None = None,
    ) -> str:
        """Render one piece of text. `compiled` is the Program's own cache, so a template
        with more texts than any global bound still compiles each text once. `exports`,
        when given, receives what the text defines at its top level (`{% set %}` values
        and macros), so later text may use them as 0.18's whole-template render allowed."""
        if "{" not in source:  # plain text: what Jinja would give, without Jinja
            return source.replace("\r\n", "\n").replace("\r", "\n")
        _work.left = MAX_STEPS
        if compiled is None:
            template = self.compile_text(source)
        elif source in compiled:
            template = compiled[source]
        else:  # the shared cache may hold it already (checking compiles `{% %}` text)
            template = compiled[source] = self.compile_text(source)
        if exports is None or "{%" not in source:
            return template.render(variables)
        context = template.new_context(dict(variables))
        try:
            text = self.sandbox.concat(template.root_render_func(context))
        except Exception:  # noqa: BLE001 - Jinja's own rewriting of the traceback, as render() does
            self.sandbox.handle_exception()
        exports.update(context.get_exported())
        return str(text)

    def defined_names(self, source: str) -> frozenset[str]:
        """Names a piece of text defines for the text after it: top-level `{% set %}`
        targets and `{% macro %}` names (also inside a top-level `{% if %}`)."""
        if "{%" not in source:
            return frozenset()
        from jinja2 import nodes

        names: set[str] = set()
        pending: list[nodes.Node] = list(self.sandbox.parse(source).body)
        while pending:
            node = pending.pop()
            if isinstance(node, (nodes.Assign, nodes.AssignBlock)):
                target = node.target
                names |= {target.name} if isinstance(target, nodes.Name) else {n.name for n in target.find_all(nodes.Name)}
            elif isinstance(node, nodes.Macro):
                names.add(node.name)
            elif isinstance(node, nodes.If):
                pending.extend([*node.body, *node.else_, *(n for elif_ in node.elif_ for n in elif_.body)])
        return frozenset(names)

    def evaluate(self, expression: str, variables: Mapping[str, Any]) -> Any:
        _work.left = MAX_STEPS
        return self.compile_expression(expression)(dict(variables))  # positional: a context key "self" is fine


@functools.cache
def _jinja_classes() -> tuple[type[ImmutableSandboxedEnvironment], type[Any]]:
    """The sandbox and the name tracker, defined on Jinja's classes when first needed."""
    from jinja2 import meta, nodes
    from jinja2.compiler import CodeGenerator
    from jinja2.exceptions import SecurityError
    from jinja2.runtime import Macro
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _RuntimeOnlyCodeGenerator(CodeGenerator):
        """Never evaluates template expressions while compiling.

        Jinja folds constant output such as `{{ [0] * 10**8 }}` or `{{ 'x'|center(10**8) }}`
        at compile time, which would run them (for minutes, with gigabytes) while the
        template is merely being parsed. Here they run when rendered, under the sandbox.
        """

        def _output_child_to_const(self, node: nodes.Expr, frame: Any, finalize: Any) -> str:
            if not isinstance(node, nodes.TemplateData):
                raise nodes.Impossible()
            return super()._output_child_to_const(node, frame, finalize)


    class Sandbox(ImmutableSandboxedEnvironment):
        """The sandbox templates render in.

        On top of Jinja's immutable sandbox: an unsafe attribute (`''.__class__`,
        `x.__dict__`, `'{0.__class__}'.format(x)`) is an error instead of an empty string,
        `*` / `**` refuse to build huge strings, lists or numbers, and one rendering does
        at most `MAX_STEPS` loop iterations and calls (every `{% for %}` iterable is counted
        as it is consumed; every call passes through `call`).
        """

        code_generator_class = _RuntimeOnlyCodeGenerator
        intercepted_binops = frozenset({"*", "**"})

        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.filters = {name: _counting_filter(f) for name, f in self.filters.items()}

        def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
            tree = super()._parse(source, name, filename)
            for loop in tree.find_all(nodes.For):
                counted = nodes.Filter(loop.iter, "_sd_counted", [], [], None, None, lineno=loop.lineno)
                loop.iter = counted.set_environment(self)
            return tree

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - Jinja's signature
            _tick(MACRO_STEPS if isinstance(__obj, Macro) else 1)
            return super().call(__context, __obj, *args, **kwargs)

        def unsafe_undefined(self, obj: Any, attribute: str) -> jinja2.Undefined:
            raise SecurityError(f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe.")

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "*":
                for seq, times in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(times, int) and not isinstance(times, bool):
                        if len(seq) * times > MAX_REPEAT:
                            raise SecurityError(f"'*' would build a sequence longer than {MAX_REPEAT:,} items")
            elif operator == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
                if right * math.log2(abs(left)) > MAX_POWER_BITS:
                    raise SecurityError(f"'**' would build a number larger than {MAX_POWER_BITS:,} bits")
            return super().call_binop(context, operator, left, right)

    class _SafeTracking(meta.TrackingCodeGenerator, _RuntimeOnlyCodeGenerator):
        """jinja2.meta's name tracker on our code generator, unoptimized: it must not
        fold (run) constant expressions either."""

        def __init__(self, environment: jinja2.Environment) -> None:
            CodeGenerator.__init__(self, environment, "<introspection>", "<introspection>", optimized=False)
            self.undeclared_identifiers: set[str] = set()

    return Sandbox, _SafeTracking


def jinja_syntax_error() -> type[jinja2.TemplateSyntaxError]:
    """Jinja's syntax error class, for an `except` clause (evaluated only when something
    was raised, so Jinja is imported only then)."""
    from jinja2 import TemplateSyntaxError

    return TemplateSyntaxError


def __getattr__(name: str) -> Any:
    if name == "Sandbox":  # the class, as before Jinja was loaded lazily
        return _jinja_classes()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_BUILDING = threading.Lock()


def _new_sandbox() -> ImmutableSandboxedEnvironment:
    import jinja2

    sandbox_class = _jinja_classes()[0]
    sandbox = sandbox_class(
        undefined=jinja2.Undefined, autoescape=False, keep_trailing_newline=True, optimized=False,
        finalize=_finalize,
    )
    sandbox.filters["tojson"] = _counting_filter(_tojson)
    sandbox.filters["_sd_counted"] = _counted
    sandbox.globals["lipsum"] = _lipsum
    return sandbox
