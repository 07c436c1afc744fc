"""SPEC §33 in a run: the static check before any model call (`check_run_flow`), the private
texts the request-boundary layer looks for (`flow_run`), and each answer's labels."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..flow import Sinks, check_flow, external_tools, model_place, slot_flows
from ..labels import PRIVATE, UNTRUSTED, private_texts
from ..syntax.nodes import JinjaValue
from ..tools import is_readonly, is_trusted, receives_of, tool_name
from .wrappers.flow import FlowRun


def _tool_results_untrusted(run: Any) -> bool:
    return run.env.mcp is not None or any(is_readonly(t) and not is_trusted(t) for t in run.options.options["tools"])


def check_run_flow(run: Any) -> None:
    """Refuse the run (a positioned FlowError) when a labelled value can reach a sink it may
    not (memoised on the Program: a batch's rows after the first pay a lookup)."""
    labelled = run.flow_labels
    if not labelled:
        return
    options = run.options.options
    places: dict[Any, tuple[str, bool]] = {}
    models = []
    resilience = run.options.resilience
    fallback = tuple(resilience.fallback) if resilience is not None else ()
    for plan in run.program.plans.values():  # in slot order; no slot hashed
        name = plan.settings.get("model")
        if isinstance(name, JinjaValue):
            models.append((f"{{{{ {name.expression} }}}}", True))
            continue
        found = []
        for each in (name, *fallback):
            key = each if each is None or isinstance(each, str) else id(each)  # a Model object: by identity
            if key not in places:
                model = run.model_for(each) if each is None or isinstance(each, str) else each
                places[key] = model_place(model, local=options["local_models"], remote=options["remote_models"])
            found.append(places[key])
        models.append(next((p for p in found if p[1]), found[0]))
    sinks = Sinks(
        tuple(models),
        external_tools(options["tools"], readonly=is_readonly, name=tool_name, receives=receives_of,
                       mcp=run.env.mcp is not None),
        _tool_results_untrusted(run),
    )
    check_flow(run.program, labelled, sinks)


def flow_run(run: Any) -> FlowRun | None:
    """What the request-boundary layer keeps from remote models in this run (None: nothing private)."""
    texts = private_texts(run.context, run.flow_labels) if run.flow_labels else ()
    if not texts:
        return None
    options = run.options.options
    return FlowRun(texts, tuple(options["local_models"]), tuple(options["remote_models"]))


def answer_labels(run: Any, key: str) -> frozenset[str]:
    """The labels of the answer `key` (a slot's; an action's answer carries none here)."""
    untrusted = _tool_results_untrusted(run)
    memo_key = ("flow-answers", frozenset(run.flow_labels.items()), untrusted)
    memo: dict[Any, Any] = run.program.memo
    answers: dict[str, frozenset[str]] | None = memo.get(memo_key)
    if answers is None:
        flows = slot_flows(run.program, run.flow_labels, tool_results_untrusted=untrusted)
        answers = {}
        for plan, flow in flows:  # a key answered twice (if/else branches): the labels of both
            answers[plan.key] = answers.get(plan.key, frozenset()) | flow.labels()
        memo[memo_key] = answers
    return answers.get(key, frozenset())


def with_labels(run: Any, recorded: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """What a paused state records of the options, with every label of the run as names
    (`private=`, `untrusted=`): the state keeps the context as plain JSON, so an `sd.Private`
    wrapper would be lost and the resumed run would not know what is private."""
    if not run.flow_labels:
        return recorded
    out = dict(recorded or {})
    for label in (PRIVATE, UNTRUSTED):
        names = sorted(name for name, labels in run.flow_labels.items() if label in labels)
        if names:
            out[label] = names
    return out
