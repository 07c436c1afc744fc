"""Authority declared once (SPEC §30, issue 47): every row that names a model, reads a file,
imports code or reaches the network says so, and the host's policy sees every such value.

The walk runs every row of the declarations (slot options, run options, eval-file keys,
action arguments) with probe values, under a host policy that refuses everything and
remembers what it was asked. A row whose probe reached the policy as a model, a file,
code or an address must carry that mark (`authority=`); the policy is asked by the one
function that resolves each kind (struckdown/authority.py), so a row that resolves a model
without the mark is found, as the throwaway row below proves.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import struckdown as sd
import struckdown.slot_options as slot_options
from struckdown import run_options
from struckdown.authority import AuthorityError, HostPolicy
from struckdown.eval import cases as eval_cases

PACKAGE = Path(sd.__file__).parent


class Recorder(HostPolicy):
    """A host policy that refuses every model, file, import and address, and remembers each."""

    def __init__(self) -> None:
        super().__init__(shared=True)
        object.__setattr__(self, "asked", [])

    def refuses(self, kind: Any, value: Any) -> str | None:
        self.asked.append((kind, str(value)))  # type: ignore[attr-defined]
        return f"probe refused {kind} {value!r}"

    def refusal(self, name: str | None) -> str | None:
        return self.refuses("model", name)


def _disagreeing_model() -> FunctionModel:
    """Typed answers alternate between x and y (a vote never agrees: confidence 0.5, so a slot
    with min_confidence= escalates); free text is `ok`."""
    turns = itertools.count()

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.output_tools:
            value = ("x", "y")[next(turns) % 2]
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"response": value})])
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(answer, model_name="walk")


def _probes(token: str) -> list[str]:
    """Values that look like a model name, a module:function, a path and a URL."""
    return [f"{token}_model", f"{token}_mod:make", f"/{token}/file.txt", f"https://{token}.invalid/x"]


#: Options some rows need beside them to be valid (SPEC §27: escalate= needs min_confidence= and
#: confidence=); a row not listed is tried on its own.
COMPANIONS: Mapping[str, str] = {
    "escalate": "confidence=vote:2, min_confidence=0.99",
    "min_confidence": "confidence=vote:2, escalate=approve",
    "tool_choice": "use_tools=true",
}
#: The slots a slot option is tried on (the first each probe parses in is run).
SLOTS = ("pick:p|x, y, {option}", "p|{option}", "halt:p|{option}", "int:p|{option}")


def _run_quietly(env: sd.Environment, template: str, **options: Any) -> None:
    try:
        env.complete(template, model=_disagreeing_model(), cache=False, **options)
    except Exception:  # noqa: BLE001 - the refusals end the run; what was asked is what counts
        pass


def _kinds_reached(recorder: Recorder, token: str) -> set[str]:
    return {kind for kind, value in recorder.asked if token in value}  # type: ignore[attr-defined]


def walk_slot_options(table: Mapping[str, Any]) -> list[str]:
    """Every slot option row whose probe reached the policy as a kind its row does not mark."""
    problems: list[str] = []
    for number, (name, row) in enumerate(table.items()):
        token = f"probe{number}x"
        reached: set[str] = set()
        for probe in _probes(token):
            try:
                row.check(probe)
            except (ValueError, TypeError):
                continue  # a value this row refuses is not one it can resolve
            option = f'{name}="{probe}"' + (f", {COMPANIONS[name]}" if name in COMPANIONS else "")
            for slot in SLOTS:
                env = sd.Environment()
                recorder = Recorder()
                env.policy = recorder
                template = "Question. [[" + slot.format(option=option) + "]]\n"
                try:
                    env.parse(template)
                except sd.TemplateSyntaxError:
                    continue
                _run_quietly(env, template)
                reached |= _kinds_reached(recorder, token)
                break
        unmarked = reached - set(row.authority)
        if unmarked:
            problems.append(f"slot option {name}= reaches {sorted(unmarked)} without authority= saying so")
    return problems


def walk_run_options(table: Mapping[str, Any]) -> list[str]:
    """Every run option row whose probe reached the policy as a kind its row does not mark."""
    problems: list[str] = []
    for number, (name, row) in enumerate(table.items()):
        token = f"probe{number}r"
        reached: set[str] = set()
        for probe in _probes(token):
            for value in (probe, [probe]):
                try:
                    if row.check is not None:
                        row.check(value)
                except (ValueError, TypeError):
                    continue
                env = sd.Environment()
                recorder = Recorder()
                env.policy = recorder
                options = {name: value}
                if name == "model":
                    _run_quietly_with(env, "Question. [[a]]\n", options)
                else:
                    _run_quietly(env, "Question. [[a]]\n", **options)
                reached |= _kinds_reached(recorder, token)
        unmarked = reached - set(row.authority)
        if unmarked:
            problems.append(f"run option {name}= reaches {sorted(unmarked)} without authority= saying so")
    return problems


def _run_quietly_with(env: sd.Environment, template: str, options: Mapping[str, Any]) -> None:
    try:
        env.complete(template, cache=False, **options)
    except Exception:  # noqa: BLE001
        pass


# -- the walk over today's rows ------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probes run in an empty folder: a row that writes a file (journal=) writes it there."""
    monkeypatch.chdir(tmp_path)


def test_every_slot_option_that_reaches_a_model_file_code_or_network_says_so() -> None:
    assert walk_slot_options(slot_options.SLOT_OPTIONS) == []


def test_every_run_option_that_reaches_a_model_file_code_or_network_says_so() -> None:
    assert walk_run_options(run_options.OPTIONS) == []


def test_the_marked_rows_are_the_ones_the_spec_names() -> None:
    marked = {name for name, row in slot_options.SLOT_OPTIONS.items() if "model" in row.authority}
    assert marked == {"model", "fallback", "escalate"}
    run_marked = {name: sorted(row.authority) for name, row in run_options.OPTIONS.items() if row.authority}
    assert run_marked == {
        "model": ["model"], "fallback": ["model"], "tools": ["code", "file"], "mcp": ["code", "file", "network"],
        "cache": ["file"], "template_path": ["file"], "include_paths": ["file"], "journal": ["file"],
        "instrument": ["network"],
    }
    assert set(eval_cases.KEY_AUTHORITY) == set(eval_cases.TOP_KEYS) | set(eval_cases.CASE_KEYS)
    registry = sd.Environment().actions
    assert {name: dict(registry.get(name).authority) for name in registry.names() if registry.get(name).authority} == {
        "fetch": {"url": frozenset({"network"})}, "history": {"filename": frozenset({"file"})},
        "evidence": {"folder": frozenset({"file"})}, "search": {"query": frozenset({"network"})},
    }


def test_every_action_argument_that_reaches_a_file_or_the_network_is_checked_by_the_policy() -> None:
    """The actions' marks reach the host's policy before the run: each marked built-in is
    asked about with the kind its argument is marked with, and nothing else is."""
    registry = sd.Environment().actions
    for name in registry.names():
        spec = registry.get(name)
        for argument in spec.authority or {"value": frozenset()}:
            env = sd.Environment()
            recorder = Recorder()
            env.policy = recorder
            _run_quietly(env, f'[[@{name}:v|{argument}="https://probe.invalid/{name}"]] Question. [[a]]\n')
            assert _kinds_reached(recorder, f"@{name}") == set(spec.authority.get(argument, ())), name


def test_every_eval_key_that_names_a_model_is_marked() -> None:
    """An eval file's `models:` and a judge's `model:` (under `expect:`) reach the policy as
    models, through the one resolver: their keys are marked so."""
    import asyncio

    from struckdown.eval.runner import evaluate_async

    probes = {
        "models": {"models": ["probe_models_m"], "cases": [{"name": "a", "expect": {"a": "ok"}}]},
        "expect": {"cases": [{"name": "a", "expect": {"a": {"judge": "polite", "model": "probe_expect_m"}}}]},
    }
    for key, data in probes.items():
        env = sd.Environment()
        recorder = Recorder()
        env.policy = recorder
        models = None if key == "models" else [FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")]))]
        try:
            asyncio.run(evaluate_async("Question. [[a]]", data, models=models, environment=env))
        except Exception:  # noqa: BLE001 - the refusals end the runs; what was asked is what counts
            pass
        reached = _kinds_reached(recorder, f"probe_{key}_m")
        assert reached == {"model"}, key
        assert reached <= eval_cases.KEY_AUTHORITY[key], key


# -- the walk catches a row that resolves without its mark ---------------------------------------
@pytest.fixture
def throwaway_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A new slot option `judge=` whose value the run resolves as a model (the way escalate=
    does), declared without `authority=`: the mistake the walk must catch."""
    from struckdown.run import confidence

    row = slot_options.SlotOption("judge", "control", slot_options.check_escalate, "A judge model (throwaway).")
    monkeypatch.setitem(slot_options.SLOT_OPTIONS, "judge", row)  # type: ignore[arg-type]
    monkeypatch.setitem(slot_options.CONTROL_OPTIONS, "judge", row.check)  # type: ignore[arg-type]
    keys = slot_options.valid_keys
    monkeypatch.setattr(slot_options, "valid_keys", lambda *a: [*keys(*a), "judge"])
    escalation = confidence.escalation

    def judged(control: Mapping[str, Any], measured: float) -> str | None:
        if control.get("judge") is not None:  # the new option's model, resolved as a model
            return str(control["judge"])
        return escalation(control, measured)

    monkeypatch.setattr(confidence, "escalation", judged)
    monkeypatch.setitem(COMPANIONS, "judge", "confidence=vote:2")  # type: ignore[index]
    yield


def test_the_walk_catches_a_new_option_that_resolves_a_model_without_the_mark(throwaway_judge: None) -> None:
    only = {"judge": slot_options.SLOT_OPTIONS["judge"]}
    assert walk_slot_options(only) == ["slot option judge= reaches ['model'] without authority= saying so"]
    marked = {"judge": slot_options.SlotOption(
        "judge", "control", slot_options.check_escalate, "", authority=frozenset({"model"}))}
    assert walk_slot_options(marked) == []


def test_the_walk_catches_escalate_without_its_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    bare = replace(slot_options.SLOT_OPTIONS["escalate"], authority=frozenset())
    monkeypatch.setitem(slot_options.SLOT_OPTIONS, "escalate", bare)  # type: ignore[arg-type]
    assert walk_slot_options({"escalate": bare}) == [
        "slot option escalate= reaches ['model'] without authority= saying so"
    ]


# -- the one function, and nothing around it ------------------------------------------------------
def test_the_host_policy_covers_run_keywords_and_marked_options_through_the_python_api() -> None:
    env = sd.Environment()
    env.policy = HostPolicy(("test",), shared=True)
    with pytest.raises(AuthorityError, match=r"^model=: model 'openai:gpt-4o' is not allowed here; allowed: test$"):
        env.complete("Hi [[a]]", model="openai:gpt-4o")
    template = 'Hi [[pick:p|x, y, confidence=vote:2, min_confidence=0.9, escalate="tempfile:mkdtemp"]]'
    with pytest.raises(AuthorityError, match=r"slot 'p': escalate=: model 'tempfile:mkdtemp' is not allowed here"):
        env.complete(template, model="test")
    assert env.complete("Hi [[a]]", model="test").results["a"].output


def test_model_names_become_models_only_through_the_one_function() -> None:
    """The builder of models from names (`models.resolve_model`) is called by
    `authority.resolve_model` alone; a new caller would bypass the host's policy."""
    callers = []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "resolve_model" not in text:
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.lstrip(".").endswith("models"):
                if any(alias.name == "resolve_model" for alias in node.names):
                    callers.append(str(path.relative_to(PACKAGE)))
    assert callers == ["authority.py"]
