"""Authority declared once (SPEC §30): what an option may reach, and the host's say over it.

Every row of the declarations (run options, slot options, eval-file keys, action
arguments) that **names a model**, **reads a file**, **imports code** (`module:function`)
or **reaches the network** carries `authority={...}` with those kinds. Every value such a
row holds is checked by one function here before it is used (`allow`; a model name
through `resolve_model`, the only place a name becomes a model), which asks the host's
`HostPolicy`. A host (`sd serve`, an application) sets the policy on its Environment;
the default one allows everything, as the command line does for its own user.

Two checks use the marks:

* before any model call, `program_refusals` walks every slot option of a Program whose row
  is marked and asks the policy about each name it holds (positioned at the option), so a
  row added later is covered by `sd serve --models` on the day it lands;
* at resolution, the one function asks again (a `{{ … }}` value, a run keyword, a value
  no static check saw).

`tests/run/test_authority.py` walks every row with probe values and fails on a row that
reaches one of these functions without the mark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from .errors import ConfigurationError

if TYPE_CHECKING:
    from .models.store import ModelStore

Kind = Literal["model", "file", "code", "network"]
KINDS: tuple[Kind, ...] = ("model", "file", "code", "network")


class AuthorityError(ConfigurationError):
    """A value names a model, a file, code or an address the host's policy does not allow."""


@dataclass(frozen=True)
class HostPolicy:
    """What the runs of a host may reach. `allowed`: model names (empty: any name, or with
    `shared` only the host's default); `shared`: many users share the host (`sd serve`): no
    files, no network, and `module:function` code only with `allow_factories` and only for
    a listed model name. Travels to a playground worker inside each job (`to_dict`)."""

    allowed: tuple[str, ...] = ()
    shared: bool = False
    allow_factories: bool = False
    # who asks (an id derived from the API key, never the key): provider prompt-cache keys
    # include it, so one key's requests never share a cache key with another's
    tenant: str | None = None

    @property
    def permissive(self) -> bool:
        """Nothing is refused (the command line's policy): the checks are skipped."""
        return not self.allowed and not self.shared

    def refusal(self, name: str | None) -> str | None:
        """Why the model `name` may not be used here (None: it may). A string comparison,
        done before anything is imported for the name."""
        if self.allowed:
            if name is not None and name not in self.allowed:
                return f"model {name!r} is not allowed here; allowed: {', '.join(self.allowed)}"
        elif self.shared and name is not None:
            return f"model {name!r} is not allowed here: this server uses its default model only"
        if self.shared and not self.allow_factories and name is not None and is_factory(name):
            return f"model {name!r} is a module:factory name, which this server runs only with --allow-factories"
        return None

    def refuses(self, kind: Kind, value: Any) -> str | None:
        """Why `value` of this kind may not be used here (None: it may)."""
        if kind == "model":
            return self.refusal(value if isinstance(value, str) else None)
        if not self.shared:
            return None
        if kind == "code":
            if self.allow_factories:
                return None
            return f"{value!r} imports Python code (module:function), which this server does not run"
        if kind == "file":
            return f"{value!r} is a file, and this server reads no files"
        return f"{value!r} reaches the network, which this server does not allow"

    def to_dict(self) -> dict[str, object]:
        return {"allowed": list(self.allowed), "shared": self.shared, "allow_factories": self.allow_factories,
                "tenant": self.tenant}

    @classmethod
    def from_dict(cls, data: object) -> HostPolicy:
        if not isinstance(data, dict):
            return cls(shared=True)  # a job without a policy gets the strictest one
        tenant = data.get("tenant")
        return cls(tuple(data.get("allowed") or ()), bool(data.get("shared")), bool(data.get("allow_factories")),
                   tenant if isinstance(tenant, str) and tenant else None)


#: The command line's policy: its user may name any model, file and code.
PERMISSIVE = HostPolicy()


@lru_cache(maxsize=64)
def is_factory(name: str) -> bool:
    """Whether `name` is a `package.module:factory` reference (imports nothing of it but
    the search for its module)."""
    if ":" not in name:
        return False
    from .models.factory import factory_reference

    return factory_reference(name.strip()) is not None


def _kinds(marks: Iterable[str]) -> list[Kind]:
    """A row's marks in the order of `KINDS` (a mark that is no kind is a mistake in the row)."""
    unknown = set(marks) - set(KINDS)
    if unknown:
        raise ValueError(f"authority marks are {', '.join(KINDS)}, not {', '.join(sorted(unknown))}")
    return [kind for kind in KINDS if kind in marks]


def _refuse(policy: HostPolicy, kind: Kind, value: Any, option: str) -> None:
    refusal = policy.refuses(kind, value)
    if refusal is not None:
        raise AuthorityError(f"{option}=: {refusal}")


# -- the one check, and the one place a model name becomes a model --------------------------------
def resolve_model(name: Any, store: ModelStore, policy: HostPolicy, *, option: str) -> Any:
    """The pydantic-ai Model for `name` (a Model passes through, a string is built, None is
    the environment's default), after the policy allowed it: the only place a model name
    becomes a model. `option` names the row it came from, for the error."""
    from .models import resolve_model as build

    if isinstance(name, str) and not policy.permissive:
        allow(("model", "code") if is_listed_factory(policy, name) else ("model",), name.strip(), policy, option=option)
    return build(name, store)


def is_listed_factory(policy: HostPolicy, name: str) -> bool:
    """A `module:factory` name the policy allows as a model (only then is its module searched)."""
    return policy.refusal(name.strip()) is None and is_factory(name.strip())


def allow(kinds: Iterable[str], value: Any, policy: HostPolicy, *, option: str) -> Any:
    """`value` (a path, a `module:function`, an address, a model name) as the row marked
    with `kinds` gives it, after the policy allowed each kind: the one check every reader,
    importer and fetcher of an option's value calls before it acts (a model name goes
    through `resolve_model`, which calls this too). An AuthorityError names the option."""
    for kind in _kinds(kinds):
        _refuse(policy, kind, value if kind != "model" else str(value).strip(), option)
    return value


# -- the rows ---------------------------------------------------------------------------------
def model_names(value: Any, keywords: Iterable[str] = ()) -> list[str]:
    """The model names a model-marked value holds: one name or several separated by commas,
    less the row's keywords that are not models (`escalate=approve`)."""
    if isinstance(value, (list, tuple)):
        parts = [str(v) for v in value]
    else:
        parts = str(value).split(",")
    skip = set(keywords)
    return [p.strip() for p in parts if p.strip() and p.strip() not in skip]


def program_refusals(program: Any, policy: HostPolicy) -> list[tuple[str, str, str, int, int]]:
    """Every marked slot option of `program` the policy refuses, as (slot key, option,
    message, line, column), before any model call. A `{{ … }}` value of a marked row is
    refused under a restrictive policy (it cannot be checked first)."""
    from .slot_options import SLOT_OPTIONS
    from .syntax.nodes import JinjaValue

    found: list[tuple[str, str, str, int, int]] = []
    if policy.permissive:
        return found
    for plan in program.plans.values():
        for option in plan.slot.options:
            row = SLOT_OPTIONS.get(option.key) if option.key is not None else None
            if row is None or not row.authority:
                continue
            pos = option.value_pos or option.pos
            where = (pos.line, pos.column)
            if isinstance(option.value, JinjaValue):
                message = (f"slot {plan.key!r}: {option.key}= is computed with {{{{ … }}}}, which this server "
                           f"does not allow: name the {'model' if 'model' in row.authority else 'value'}")
                found.append((plan.key, option.key, message, *where))
                continue
            for kind in _kinds(row.authority):
                values = model_names(option.value, row.choices) if kind == "model" else [str(option.value)]
                for value in values:
                    refusal = policy.refuses(kind, value)
                    if refusal is not None:
                        found.append((plan.key, option.key, f"slot {plan.key!r}: {option.key}=: {refusal}", *where))
    return found


def action_refusals(program: Any, policy: HostPolicy) -> list[tuple[str, int, int]]:
    """Every `[[@action]]` of `program` whose registration marks an argument as reaching
    what the policy refuses (SPEC §30: `@fetch` the network, `@history` a file), as
    (message, line, column); the marks are the action's, whatever arguments it is given."""
    from .syntax.nodes import Action, walk

    found: list[tuple[str, int, int]] = []
    if policy.permissive:
        return found
    registry = program.environment.actions
    for segment in program.segments:
        for node in walk(segment.nodes):
            if not isinstance(node, Action) or node.name not in registry:
                continue
            spec = registry.get(node.name)
            for argument, kinds in spec.authority.items():
                given = next((o.value for o in node.options if o.key == argument), None)
                for kind in _kinds(kinds):
                    refusal = policy.refuses(kind, f"@{node.name} {argument}={given!s}" if given is not None
                                             else f"@{node.name}")
                    if refusal is not None:
                        found.append((f"@{node.name}: {argument}=: {refusal}", node.pos.line, node.pos.column))
    return found


def check_program(program: Any, policy: HostPolicy) -> None:
    """Refuse, before any model call, a program whose marked options the policy refuses."""
    found = program_refusals(program, policy)
    if found:
        key, option, message, line, column = found[0]
        raise AuthorityError(f"{message} (line {line}, column {column})")
    actions = action_refusals(program, policy)
    if actions:
        message, line, column = actions[0]
        raise AuthorityError(f"{message} (line {line}, column {column})")


def run_option_refusals(options: Mapping[str, Any], policy: HostPolicy, table: Mapping[str, Any]) -> list[str]:
    """What the policy says of the marked run keywords given (a call's, a recorded state's);
    `table`: the run options' declaration (`run_options.OPTIONS`, a layer above this one).
    Only names are asked about: strings and paths (alone or in a list). An object the host
    passed (a Model, a function, an MCP server object, True) is the host's own."""
    import os

    found: list[str] = []
    if policy.permissive:
        return found
    for name, value in options.items():
        row = table.get(name)
        if row is None or not row.authority or isinstance(value, bool) or value is None:
            continue
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        names = [str(os.fspath(v)) for v in items if isinstance(v, (str, os.PathLike))]
        for kind in _kinds(row.authority):
            for item in model_names(names) if kind == "model" else names:
                refusal = policy.refuses(kind, item)
                if refusal is not None:
                    found.append(f"{name}=: {refusal}")
    return found
