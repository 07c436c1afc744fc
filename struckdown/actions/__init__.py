"""`[[@name:key|args]]` actions: Python functions that run without a model call.

Built-ins: `@timestamp`, `@set`, `@fetch` (opt-in: STRUCKDOWN_ALLOW_FETCH=1), and
0.x's `@history`, `@evidence`, `@search` (opt-in: STRUCKDOWN_ALLOW_SEARCH=1),
`@markdownify` and `@noop` (their own modules: `actions/history.py`, `actions/evidence.py`,
`actions/search.py`). Each Environment owns an `ActionRegistry` (`builtin_actions()`
plus what users add with `Environment.register_action`). An action marked
`side_effects=True` is a join point for pending guards (SPEC §4). As in 0.18, an
action's value joins the conversation as a user turn (`role="assistant"` for an
assistant turn, `role="none"` to keep it out, at registration or as the template's
`role=` option); `@history` adds the turns it read. Arguments are converted to the
function's annotated types, as 0.x did.

An unquoted identifier among an action's options that names a variable (a context
value or an earlier answer) passes that variable's value, as in 0.x
(`[[@search:hits|query=topic]]`); anything else, and every quoted string, is literal.
"""

from __future__ import annotations

import datetime as _dt
import inspect
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..syntax.nodes import Action, Option
from .html_text import html_to_text, prepared_html

Role = Literal["user", "assistant"]
#: the values of a template's `role=` option on an action (`none`: out of the conversation)
ROLE_CHOICES = ("user", "assistant", "none")


@dataclass(frozen=True)
class ActionSpec:
    name: str
    func: Callable[..., Any]
    side_effects: bool = False
    validate: Callable[[Action], None] = field(default=lambda node: None)
    role: Role | None = "user"  # the result also joins the conversation as this turn (None: it does not)
    turns: bool = False  # the result is a list of {"role", "content"} turns that join the conversation
    # SPEC §30: per argument, what it reaches ("model", "file", "code", "network"); a host's policy
    # (`sd serve`: no files, no network) refuses an action with a marked argument before the run
    authority: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def reaches(self) -> frozenset[str]:
        """Every kind this action's arguments reach (its marks, together)."""
        return frozenset(kind for kinds in self.authority.values() for kind in kinds)

    def check(self, node: Action) -> None:
        role = self.role_option(node)
        if role is not None and role.value not in ROLE_CHOICES:
            raise ValueError(f"role= is one of user, assistant, none, not {role.value!r}")
        self.validate(self.without_role(node))

    def role_option(self, node: Action) -> Option | None:
        """The template's `role=` on this action (0.18): which turn its value becomes. An
        action whose value is turns (`@history`) reads `role=` itself."""
        if self.turns:
            return None
        return next((o for o in node.options if o.key == "role"), None)

    def without_role(self, node: Action) -> Action:
        role = self.role_option(node)
        if role is None:
            return node
        from dataclasses import replace

        return replace(node, options=tuple(o for o in node.options if o is not role))

    def role_for(self, node: Action) -> Role | None:
        """The turn this action's value becomes here: the template's `role=` if given."""
        role = self.role_option(node)
        if role is None:
            return self.role
        return None if role.value == "none" else role.value  # type: ignore[return-value]  # checked at parse

    @property
    def wants_context(self) -> bool:
        return "context" in inspect.signature(self.func).parameters

    @property
    def context_first(self) -> bool:
        """Whether `context` is the function's first positional parameter (0.x's habit)."""
        params = list(inspect.signature(self.func).parameters.values())
        return bool(params) and params[0].name == "context" and params[0].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )

    def add_to(self, conversation: Any, value: Any, node: Action) -> None:
        """Add the result to the segment's conversation: as one turn of its role (the
        template's `role=`, else the action's; none: nothing), or (for an action of
        `turns`) as the turns it holds, in order. An empty value adds no turn."""
        from ..codec import as_text

        if not self.turns:
            role = self.role_for(node)
            text = "" if value is None else as_text(value)
            if role is not None and text.strip():
                conversation.add_turn(role, text)
            return
        for turn in value or ():
            conversation.add_turn(turn["role"], as_text(turn["content"]))


def option_argument(option: Option, variables: Mapping[str, Any]) -> Any:
    """What an action receives for one (non-`{{ }}`) option: the variable an unquoted
    identifier names, when there is one; otherwise the value as written."""
    value = option.value
    if not option.quoted and isinstance(value, str) and value.isidentifier() and value in variables:
        return variables[value]
    return value


def action_refs(node: Any) -> frozenset[str]:
    """The names an action's unquoted identifiers may read (for the segments' waits)."""
    if not isinstance(node, Action):
        return frozenset()
    return frozenset(
        o.value for o in node.options if not o.quoted and isinstance(o.value, str) and o.value.isidentifier()
    )


class ActionRegistry:
    def __init__(self) -> None:
        self._actions: dict[str, ActionSpec] = {}

    def register(
        self,
        name: str,
        func: Callable[..., Any],
        *,
        side_effects: bool = False,
        validate: Callable[[Action], None] | None = None,
        role: Role | Literal["none"] | None = "user",
        turns: bool = False,
        authority: Mapping[str, frozenset[str] | set[str]] | None = None,
    ) -> None:
        if not name.isidentifier():
            raise ValueError(f"action names are identifiers, got {name!r}")
        if role not in (None, "user", "assistant", "none"):
            raise ValueError(f"role must be 'user', 'assistant' or 'none' (None), not {role!r}")
        kept: Role | None = None if role in (None, "none") else role  # type: ignore[assignment]
        marks = {arg: frozenset(kinds) for arg, kinds in (authority or {}).items()}
        self._actions[name] = ActionSpec(name, func, side_effects, validate or (lambda node: None), kept, turns, marks)

    def unregister(self, name: str) -> None:
        self._actions.pop(name, None)

    def get(self, name: str) -> ActionSpec:
        return self._actions[name]

    def __contains__(self, name: object) -> bool:
        return name in self._actions

    def names(self) -> list[str]:
        return sorted(self._actions)


def _timestamp(format: str | None = None) -> str:
    now = _dt.datetime.now().astimezone()
    return now.strftime(format) if format else now.isoformat(timespec="seconds")


def _check_timestamp(node: Action) -> None:
    for option in node.options:
        if option.key not in ("format",):
            raise ValueError("takes only format=\"…\" (a strftime string)")


def _set(*values: Any, value: Any = None) -> Any:
    if values and value is not None:
        raise TypeError("@set takes one value")
    if len(values) > 1:
        return list(values)
    return values[0] if values else value


def _check_set(node: Action) -> None:
    if node.key is None or node.implicit_key:
        raise ValueError("needs a key: [[@set:name|value]]")
    if any(o.key not in (None, "value") for o in node.options):
        raise ValueError("takes a value: [[@set:name|value]] or [[@set:name|value=…]]")


FETCH_TIMEOUT_S = 10.0
FETCH_MAX_BYTES = 1_000_000


FETCH_MAX_CHARS = 64_000  # 0.18's default max_chars


def _fetch(
    url: str, raw: bool = False, timeout: float | None = None, max_chars: int | None = None, playwright: bool = False
) -> str:
    """HTTP GET a page and return it as markdown (opt-in). The time and size caps are the
    host's (FETCH_TIMEOUT_S, FETCH_MAX_BYTES): 0.18's `timeout=` and `max_chars=` may only
    lower them; `raw=true` keeps the HTML; `playwright=` is accepted and does nothing
    (a warning says so: no browser runs here)."""
    if os.environ.get("STRUCKDOWN_ALLOW_FETCH") != "1":
        raise PermissionError("@fetch is disabled; set STRUCKDOWN_ALLOW_FETCH=1 to allow it")
    if not re.match(r"https?://", url):
        raise ValueError("@fetch takes http:// or https:// URLs only")
    if playwright:
        from ..notices import warn

        warn("@fetch: playwright= is accepted for 0.18's templates but no browser runs; fetched directly")
    wait = FETCH_TIMEOUT_S if timeout is None else min(max(float(timeout), 0.001), FETCH_TIMEOUT_S)
    import urllib.request

    with urllib.request.urlopen(url, timeout=wait) as response:  # noqa: S310 - scheme checked above
        body = response.read(FETCH_MAX_BYTES + 1)[:FETCH_MAX_BYTES]
        charset = response.headers.get_content_charset() or "utf-8"
    page = body.decode(charset, errors="replace")
    text = page if raw else page_to_markdown(page)
    return text[: FETCH_MAX_CHARS if max_chars is None else max(0, min(int(max_chars), FETCH_MAX_BYTES))]


def page_to_markdown(html: str, extract_content: bool = True) -> str:
    """A page as markdown that keeps links and emphasis (the `markdownify` library, in the
    `search` extra); without it, the readable text of `html_to_text`. `extract_content`
    drops navigation, headers, footers, asides and forms first, as 0.18 kept the content."""
    try:
        from bs4 import BeautifulSoup
        from markdownify import markdownify
    except ImportError:
        return html_to_text(html)
    from .html_text import lxml_etree

    html, note = prepared_html(html)  # capped, long numeric references made U+FFFD
    if lxml_etree() is None:  # BeautifulSoup's "html.parser" is Python's, quadratic on some pages
        return html_to_text(html) + note
    soup = BeautifulSoup(html, "lxml")
    dropped = ["script", "style", "noscript", "template"]
    if extract_content:
        dropped += ["nav", "header", "footer", "aside", "form"]
    for tag in soup(dropped):
        tag.decompose()
    text: str = markdownify(str(soup), heading_style="ATX", bullets="-", bs4_options="lxml")  # never html.parser
    return re.sub(r"\n\s*\n+", "\n\n", text).strip() + note


_FETCH_KEYS = ("url", "raw", "timeout", "max_chars", "playwright")


def _check_fetch(node: Action) -> None:
    if not node.options:
        raise ValueError('needs a URL: [[@fetch:page|url="https://…"]]')
    unknown = [o.key for o in node.options if o.key not in (None, *_FETCH_KEYS)]
    if unknown:
        raise ValueError(
            f"unknown option {unknown[0]!r} (it takes url=, raw=, timeout=, max_chars=, playwright=; "
            'its time and size caps are the host\'s): [[@fetch:page|url="https://…"]]'
        )


def _markdownify(html: str, extract_content: bool = True) -> str:
    """HTML → markdown with links and emphasis (needs the `search` extra), e.g. a page held
    in a context value."""
    try:
        import markdownify  # noqa: F401 - only to say what is missing
    except ImportError:
        raise ImportError("@markdownify needs the markdownify library: pip install 'struckdown[search]'") from None
    return page_to_markdown(str(html), extract_content)


def _noop(*args: Any, **kwargs: Any) -> str:
    """Does nothing and stores "" (0.x ran unknown actions as this)."""
    return ""


def takes_only(*keys: str, usage: str, needs_value: bool = False) -> Callable[[Action], None]:
    """A validator: the action takes positional values and these keys only."""

    def check(node: Action) -> None:
        if needs_value and not node.options:
            raise ValueError(f"needs a value: {usage}")
        unknown = [o.key for o in node.options if o.key is not None and o.key not in keys]
        if unknown:
            listed = ", ".join(f"{k}=" for k in keys) if keys else "no keyed options"
            raise ValueError(f"unknown option {unknown[0]!r} (it takes {listed}): {usage}")

    return check


#: The opt-in built-ins: (the environment variable that allows them, what they reach)
OPT_IN = {"fetch": ("STRUCKDOWN_ALLOW_FETCH", "web pages"), "search": ("STRUCKDOWN_ALLOW_SEARCH", "a web search engine")}


def check_allowed(program: Any, registry: ActionRegistry) -> None:
    """A built-in `@fetch` / `@search` the host has not allowed is refused when the run
    starts, before any request, at its line:col (not when the run reaches it). An action
    registered under the same name by the host is the host's, and not checked."""
    opt_in = program.memo.get("opt_in_actions")  # the template's @fetch/@search, found once per Program
    if opt_in is None:
        from ..syntax.nodes import walk

        opt_in = program.memo["opt_in_actions"] = tuple(
            node for segment in program.segments for node in walk(segment.nodes)
            if isinstance(node, Action) and node.name in OPT_IN
        )
    if not opt_in:
        return
    from ..syntax.source import SourceMap
    from . import search as action_search

    builtins = {"fetch": _fetch, "search": action_search.builtin_search}
    for node in opt_in:
        if node.name in registry:
            if registry.get(node.name).func is not builtins[node.name]:
                continue
            variable, reach = OPT_IN[node.name]
            if os.environ.get(variable) == "1":
                continue
            template = program.template
            raise SourceMap(template.source, template.filename).for_file(node.pos.filename).error(
                f"@{node.name} is disabled: it reaches {reach}, which the host has not allowed",
                node.pos.line,
                node.pos.column,
                f"set {variable}=1 in the environment to allow it (see docs/security.md)",
            )


def builtin_actions() -> ActionRegistry:
    """A new registry holding the built-in actions (each Environment starts from one)."""
    from . import evidence as action_evidence
    from . import history as action_history
    from . import search as action_search

    registry = ActionRegistry()
    registry.register("timestamp", _timestamp, validate=_check_timestamp)
    registry.register("set", _set, validate=_check_set)
    # SPEC §30: the arguments that reach a file or the network say so
    registry.register("fetch", _fetch, validate=_check_fetch, authority={"url": {"network"}})
    registry.register("history", action_history.history, validate=action_history.check, turns=True, role=None,
                      authority={"filename": {"file"}})
    registry.register("evidence", action_evidence.evidence, validate=action_evidence.check,
                      authority={"folder": {"file"}})
    registry.register("search", action_search.builtin_search, validate=action_search.check,
                      authority={"query": {"network"}})
    registry.register(
        "markdownify", _markdownify,
        validate=takes_only("html", "extract_content", usage="[[@markdownify:text|html=page]]", needs_value=True),
    )
    registry.register("noop", _noop)
    return registry


async def call_action(spec: ActionSpec, args: list[Any], kwargs: Mapping[str, Any], variables: Mapping[str, Any]) -> Any:
    import anyio

    extra: dict[str, Any] = {}
    if spec.wants_context:
        if spec.context_first:  # 0.x's `def action(context, query, n=3)`: the options fill the rest
            args = [dict(variables), *args]
        else:
            extra = {"context": dict(variables)}
    args, kwargs = convert_arguments(spec.func, args, {**kwargs, **extra})
    if inspect.iscoroutinefunction(inspect.unwrap(spec.func)) or inspect.iscoroutinefunction(spec.func):
        return await spec.func(*args, **kwargs)
    return await anyio.to_thread.run_sync(lambda: spec.func(*args, **kwargs))


def convert_arguments(
    func: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Each argument converted to its parameter's annotation, as 0.x did (`n="3"` → 3 for
    `n: int`; a number for a `str` parameter becomes its text). Unannotated and `Any`
    parameters, and `context`, are passed as they are; a value that does not convert is
    a TypeError naming the parameter. Arguments that do not fit the signature are left
    for the call itself to refuse."""
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    hints = _hints(func)
    params = inspect.signature(func).parameters
    for name, value in list(bound.arguments.items()):
        hint = hints.get(name)
        if name == "context" or hint is None or hint is Any:
            continue
        kind = params[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            bound.arguments[name] = tuple(_convert(hint, v, name) for v in value)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            bound.arguments[name] = {k: _convert(hint, v, k) for k, v in value.items()}
        else:
            bound.arguments[name] = _convert(hint, value, name)
    return list(bound.args), dict(bound.kwargs)


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(inspect.unwrap(func))
    except Exception:  # noqa: BLE001 - annotations that do not resolve convert nothing
        return {}


def _convert(hint: Any, value: Any, name: str) -> Any:
    from pydantic import ConfigDict, TypeAdapter, ValidationError

    try:
        adapter: TypeAdapter[Any] = TypeAdapter(hint, config=ConfigDict(coerce_numbers_to_str=True))
    except Exception:  # noqa: BLE001 - a class with its own config, or one pydantic cannot take
        try:
            adapter = TypeAdapter(hint)
        except Exception:  # noqa: BLE001 - not a type pydantic knows: passed as it is
            return value
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
        raise TypeError(f"argument {name}={value!r}: {problem}") from None
