"""SPEC §33: where private and untrusted values can go, proved on the plan before any call.

`slot_flows` walks a Program once for a set of labelled context names and gives each slot
the labels of its request (the context names its segment's text and options read up to it,
the earlier answers of its conversation) and of its answer (the request's, less `untrusted`
for a closed-set type, plus `untrusted` when it reads tool results that are not
`@trusted`). Each label keeps the chain of names that brought it. `refusals` then checks
the three sinks against the run's places (each slot's model local or remote, the external
tools it may call) and returns positioned `FlowError`s; `check_flow` raises the first.
Both are memoised on the Program per labels and places, so a batch pays once, not per row.

With no labels anywhere there is nothing to check: no refusals (0.x templates run as before).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from .actions import action_refs
from .errors import FlowError
from .labels import PRIVATE, UNTRUSTED
from .plan import node_reads, reads_of
from .syntax.nodes import Action, JinjaValue, Slot, walk

if TYPE_CHECKING:
    from .plan import Program, SlotPlan

#: The chain of names that brought a label, newest first, linked: ("reply", ("summary", ("email", None))).
#: Extending it is O(1) however long the conversation; `names` flattens it for an error.
Link = tuple[str, Any]
#: (label, origin) → its chain.
Taint = dict[tuple[str, str], Link]


def names(link: Link | None) -> tuple[str, ...]:
    """A chain, oldest first."""
    out: list[str] = []
    while link is not None:
        out.append(link[0])
        link = link[1]
    return tuple(reversed(out))

#: Types whose answers come from a closed set: they can choose but cannot carry instructions.
CLOSED_TYPES = frozenset({"pick", "bool", "boolean", "decide", "date", "datetime", "time", "score"})
#: Actions whose results come from outside.
UNTRUSTED_ACTIONS = frozenset({"fetch", "search"})


@dataclass(frozen=True)
class SlotFlow:
    request: Mapping[tuple[str, str], Link]
    answer: Mapping[tuple[str, str], Link]

    def labels(self, of: str = "answer") -> frozenset[str]:
        return frozenset(label for label, _ in (self.answer if of == "answer" else self.request))

    def origins(self, label: str) -> list[tuple[str, Link]]:
        return [(origin, chain) for (found, origin), chain in self.request.items() if found == label]


def closed_set(slot: Slot, type_options: Mapping[str, Any]) -> bool:
    """Whether the slot's answer is one of a closed set of values (SPEC §33)."""
    if slot.type_name in CLOSED_TYPES:
        return True
    if slot.type_name in ("int", "number"):
        bounds = (type_options.get("min"), type_options.get("max"))
        return all(b is not None and not isinstance(b, JinjaValue) for b in bounds)
    return False


def slot_flows(program: Program, labelled: Mapping[str, frozenset[str]], *,
               tool_results_untrusted: bool) -> list[tuple[SlotPlan, SlotFlow]]:
    """Each slot's plan, request and answer labels, in `Program.slots()` order (memoised on the
    Program; a list, not a dict by slot: a slot's hash walks all its options)."""
    memo_key = ("flow", frozenset(labelled.items()), tool_results_untrusted)
    found: list[tuple[SlotPlan, SlotFlow]] | None = program.memo.get(memo_key)  # type: ignore[call-overload]
    if found is None:
        found = program.memo[memo_key] = _walk(program, labelled, tool_results_untrusted)  # type: ignore[index]
    return found


def _walk(program: Program, labelled: Mapping[str, frozenset[str]],
          tool_results_untrusted: bool) -> list[tuple[SlotPlan, SlotFlow]]:
    """One pass over the plan. A slot's request is shared with the slots before it while nothing
    new joined it (copy on write): a long conversation costs one dict, not one per slot."""
    renderer = program.environment.renderer
    taint_of: dict[str, Taint] = {
        name: {(label, name): (name, None) for label in labels} for name, labels in labelled.items()
    }
    flows: list[tuple[SlotPlan, SlotFlow]] = []
    plans = iter(program.plans.values())  # in the order the walk meets the slots (plan_program's)
    carried: Taint = {}
    empty: Taint = {}
    for segment in program.segments:
        request: Taint = dict(carried)
        snapshot: Taint | None = None
        for node in walk(segment.nodes):
            reads = node_reads(node, renderer)
            if isinstance(node, Action):
                reads = reads | action_refs(node)
            for name in sorted(reads) if len(reads) > 1 else reads:  # a set: sorted, so errors name the same origin
                found = taint_of.get(name)
                if found:
                    for origin, chain in found.items():
                        if origin not in request:
                            request[origin], snapshot = chain, None
            if isinstance(node, Slot):
                if snapshot is None:
                    snapshot = dict(request) if request else empty
                plan = next(plans)
                if plan.slot is not node:
                    raise AssertionError("the plan's slots are not in walk order")
                answer = snapshot
                if answer and closed_set(node, plan.type_options):
                    answer = {k: v for k, v in answer.items() if k[0] != UNTRUSTED}
                elif tool_results_untrusted and plan.use_tools:
                    answer = {**answer, (UNTRUSTED, f"{node.key}'s tool results"): (f"{node.key}'s tool results", None)}
                flows.append((plan, SlotFlow(snapshot, answer)))
                key: str = node.key
            elif isinstance(node, Action) and node.key is not None:
                answer = request
                if node.name in UNTRUSTED_ACTIONS:
                    answer = {**answer, (UNTRUSTED, f"@{node.name}"): (f"@{node.name}", None)}
                key = node.key
            else:
                continue
            if answer:
                taint_of[key] = {k: (key, v) for k, v in answer.items()}
                for origin, chain in taint_of[key].items():
                    if origin not in request:
                        request[origin], snapshot = chain, None
            else:
                taint_of.pop(key, None)
        for name in reads_of(segment.carried, renderer) if segment.carried else ():
            for origin, chain in taint_of.get(name, {}).items():  # global instructions reach later segments
                carried.setdefault(origin, chain)
    return flows


# -- places --------------------------------------------------------------------------------------


def _loopback(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url if "//" in url else f"//{url}").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def model_place(model: Any, *, local: Iterable[str] = (), remote: Iterable[str] = ()) -> tuple[str, bool]:
    """(the model's name, whether it is remote): a `FunctionModel`, a `TestModel` and a model
    whose base URL is on loopback are local; everything else is remote. `local` / `remote`
    name models or base URLs the host classes otherwise (they win)."""
    name = str(getattr(model, "model_name", None) or model)
    system = getattr(model, "system", None)
    base = getattr(model, "base_url", None)
    base = str(base) if base else None
    keys = {name, f"{system}:{name}" if system else name} | ({base.rstrip("/")} if base else set())
    if keys & {str(r).rstrip("/") for r in remote}:
        return name, True
    if keys & {str(r).rstrip("/") for r in local}:
        return name, False
    if any(cls.__name__ in ("FunctionModel", "TestModel") for cls in type(model).__mro__):
        return name, False
    return name, not _loopback(base)


# -- the three refusals --------------------------------------------------------------------------


@dataclass(frozen=True)
class Sinks:
    """The run's places: each slot's model (name, remote?) and the external tools the slots
    with tools may call (name, the private names it receives)."""

    models: tuple[tuple[str, bool], ...]  # per slot, in `Program.slots()` order
    external: tuple[tuple[str, frozenset[str]], ...]
    tool_results_untrusted: bool
    rerouted: bool = False  # private_model= takes the private slots to a local model
    redacted: frozenset[str] = frozenset()  # slots with redact=true


def _chain(chain: Sequence[str]) -> str:
    return " → ".join(chain)


def refusals(program: Program, labelled: Mapping[str, frozenset[str]], sinks: Sinks) -> list[FlowError]:
    """Every refusal of SPEC §33, in template order (none when nothing is labelled)."""
    if not labelled:
        return []
    flows = slot_flows(program, labelled, tool_results_untrusted=sinks.tool_results_untrusted)
    out: list[FlowError] = []
    for (plan, flow), (model, remote) in zip(flows, sinks.models):
        slot, pos = plan.slot, plan.slot.pos

        def refuse(message: str, chain: tuple[str, ...]) -> None:
            out.append(FlowError(message, pos.line, pos.column, pos.filename, chain))

        private = flow.origins(PRIVATE)
        if private and remote and not sinks.rerouted and slot.key not in sinks.redacted:
            origin, chain = private[0]
            path = (*names(chain), slot.key)
            refuse(f"private value {origin!r} reaches remote model {model!r} in the request of slot "
                   f"{slot.key!r}: {_chain(path)}", path)
        if not plan.use_tools or not sinks.external:
            continue
        untrusted = flow.origins(UNTRUSTED)
        if sinks.tool_results_untrusted:
            untrusted.append((f"{slot.key}'s tool results", (f"{slot.key}'s tool results", None)))
        if untrusted:
            origin, chain = untrusted[0]
            path = (*names(chain), slot.key)
            refuse(f"untrusted text {origin!r} reaches slot {slot.key!r}, which can call the external tool "
                   f"{sinks.external[0][0]!r}: {_chain(path)}", path)
        for tool, takes in sinks.external:
            leaked = [(o, c) for o, c in private if o not in takes]
            if leaked:
                origin, chain = leaked[0]
                path = (*names(chain), slot.key, tool)
                refuse(f"private value {origin!r} can reach the arguments of the external tool {tool!r} from "
                       f"slot {slot.key!r} (mark it @receives({origin!r}) if it may): {_chain(path)}", path)
                break
    return out


def check_flow(program: Program, labelled: Mapping[str, frozenset[str]], sinks: Sinks, *,
               raising: bool = True) -> list[FlowError]:
    """Raise the first refusal (every run calls this before any model call); `raising=False`:
    return them all. Memoised on the Program per labels and places: a batch's later rows pay
    a lookup."""
    key = ("flow-check", frozenset(labelled.items()), sinks)
    errors: list[FlowError] | None = program.memo.get(key)  # type: ignore[call-overload]
    if errors is None:
        errors = program.memo[key] = refusals(program, labelled, sinks)  # type: ignore[index]
    if errors and raising:
        raise errors[0]
    return list(errors)


def external_tools(tools: Iterable[Any], *, readonly: Callable[[Any], bool], name: Callable[[Any], str],
                   receives: Callable[[Any], frozenset[str]], mcp: bool) -> tuple[tuple[str, frozenset[str]], ...]:
    """The run's external sinks: its tools that are not `@readonly`, and its MCP servers."""
    out = [(name(tool), receives(tool)) for tool in tools if not readonly(tool)]
    if mcp:
        out.append(("MCP tools", frozenset()))
    return tuple(out)


def template_refusals(
    program: Program,
    *,
    private: Iterable[str] = (),
    untrusted: Iterable[str] = (),
    labels: Mapping[str, frozenset[str]] | None = None,
    model: Any = None,
    tools: Sequence[Any] = (),
    mcp: bool = False,
    local_models: Iterable[str] = (),
    remote_models: Iterable[str] = (),
) -> list[FlowError]:
    """`sd check --flow`: every refusal of the template for these labels and places, without a
    run (the model named by `model`, a slot's `model=` or the environment's default; a model
    that cannot be built, e.g. none configured, counts as remote)."""
    from .authority import resolve_model
    from .labels import PRIVATE as P
    from .labels import UNTRUSTED as U
    from .tools import is_readonly, is_trusted, receives_of, tool_name

    labelled: dict[str, set[str]] = {k: set(v) for k, v in (labels or {}).items()}
    for names, label in ((private, P), (untrusted, U)):
        for name in names:
            labelled.setdefault(name, set()).add(label)
    frozen = {k: frozenset(v) for k, v in labelled.items()}
    if not frozen:
        return []
    env = program.environment
    local, remote = tuple(local_models), tuple(remote_models)
    places: dict[Any, tuple[str, bool]] = {}

    def place(name: Any) -> tuple[str, bool]:
        if name not in places:
            try:
                built = resolve_model(name, env.models, env.policy, option="model")
            except Exception:  # noqa: BLE001 - an unknown or unconfigured model: counted as remote
                places[name] = (str(name or "(default model)"), True)
            else:
                places[name] = model_place(built, local=local, remote=remote)
        return places[name]

    models = []
    for plan in program.plans.values():  # not program.plan(slot): a slot's hash walks its options
        own = plan.settings.get("model")
        if isinstance(own, JinjaValue):
            models.append((f"{{{{ {own.expression} }}}}", True))
        else:
            models.append(place(own if own is not None else model))
    sinks = Sinks(
        tuple(models),
        external_tools(tools, readonly=is_readonly, name=tool_name, receives=receives_of, mcp=mcp),
        mcp or any(is_readonly(tool) and not is_trusted(tool) for tool in tools),
    )
    return check_flow(program, frozen, sinks, raising=False)
