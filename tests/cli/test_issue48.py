"""Issue 48, what a new user ran into (fourth pass): the CLI items, in process. The same
runs through real `sd` processes are in test_issue48_processes.py (marker `process`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cli_support import plain_environment, sd, use_model  # noqa: F401 - fixtures

REFUND_TOOLS = '''\
def issue_refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"
'''
REFUND = "Order {{ order }} broke. Refund it. [[reply|use_tools=true, approve=issue_refund, max_iter=3]]\n"
REFUND_EVAL = """\
cases:
  - name: refunded
    context: {order: A1}
    expect:
      tools: {called: [issue_refund]}
"""


def use_models(monkeypatch: Any, models: dict[str, Any]) -> None:
    """These model names are these Models (`models._from_string` makes a Model of a name)."""
    from struckdown import models as resolution

    real = resolution._from_string
    monkeypatch.setattr(resolution, "_from_string", lambda name, *a, **k: models.get(name) or real(name, *a, **k))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def report(output: str) -> list[str]:
    """The report's lines, without the progress line and with times as N."""
    lines = [line for line in output.splitlines() if not line.startswith("eval:")]
    return [re.sub(r"\d+\.\d+ s\b", "N s", line) for line in lines]


def refund_files(tmp_path: Path) -> tuple[Path, Path]:
    write(tmp_path / "refund.eval.yaml", REFUND_EVAL)
    return write(tmp_path / "refund.sd", REFUND), write(tmp_path / "tools.py", REFUND_TOOLS)


# -- item 4: sd eval --approve -------------------------------------------------------------


def test_eval_approve_all_allows_the_calls_that_need_approval(tmp_path: Path) -> None:
    template, tools = refund_files(tmp_path)
    done = sd("eval", template, "--model", "test", "--tools", tools, "--approve", "all")
    assert done.exit_code == 0, done.output
    assert report(done.output) == [
        "refund.sd · test",
        "  ✓ refunded  1/1  100 %  [21–100 %]  $0.0000  N s",
        "test: 1/1 cases pass, 0 flaky, 1/1 runs, $0.0000, N s",
    ]


def test_eval_approve_none_denies_them_and_the_model_goes_on(tmp_path: Path) -> None:
    template, tools = refund_files(tmp_path)
    done = sd("eval", template, "--model", "test", "--tools", tools, "--approve", "none")
    assert done.exit_code == 1, done.output
    assert report(done.output) == [
        "refund.sd · test",
        "  ✗ refunded  0/1    0 %  [0–79 %]  $0.0000  N s",
        "      repeat 1: tools: issue_refund was not called (calls: none)",
        "test: 0/1 cases pass, 0 flaky, 0/1 runs, $0.0000, N s",
    ]


def test_eval_without_approve_fails_the_paused_run_and_names_the_flag(tmp_path: Path) -> None:
    template, tools = refund_files(tmp_path)
    done = sd("eval", template, "--model", "test", "--tools", tools)
    assert done.exit_code == 1, done.output
    assert report(done.output)[-1] == (
        "a run paused for a tool call that needs approval (it failed): --approve all|none decides them"
    )


def test_eval_approve_takes_all_or_none(tmp_path: Path) -> None:
    template, tools = refund_files(tmp_path)
    done = sd("eval", template, "--model", "test", "--tools", tools, "--approve", "maybe")
    assert (done.exit_code, done.output) == (2, "error: --approve takes all or none, not 'maybe'\n")


# -- item 5: a judge model that fails ----------------------------------------------------------

GREET = "Write a greeting. [[greeting]]\n"
GREET_EVAL = """\
cases:
  - name: polite
    expect:
      greeting: {judge: polite, model: grader}
  - name: short
    expect:
      greeting: {length: {max: 500}}
"""


def test_a_failing_judge_fails_its_check_and_the_report_and_json_are_still_written(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import json

    from scripted import Script

    def down(call: Any) -> Any:
        raise RuntimeError("judge backend down")

    models = {"m": Script(lambda call: "Hello there!").model("m"), "grader": Script(down).model("grader")}
    use_models(monkeypatch, models)
    write(tmp_path / "greet.eval.yaml", GREET_EVAL)
    template = write(tmp_path / "greet.sd", GREET)
    done = sd("eval", template, "-m", "m", "--json", tmp_path / "r.json")
    assert done.exit_code == 1, done.output
    assert report(done.output) == [
        "greet.sd · m",
        "  ✗ polite  0/1    0 %  [0–79 %]  $0.0000  N s",
        "      repeat 1: greeting: the judge (grader) failed: RuntimeError: judge backend down",
        "  ✓ short   1/1  100 %  [21–100 %]  $0.0000  N s",
        "  slots: greeting 1/2 (50 %)",
        "m: 1/2 cases pass, 0 flaky, 1/2 runs, $0.0000, N s",
    ]
    failures = [c["failures"] for c in json.loads((tmp_path / "r.json").read_text())["cases"]]
    assert failures == [
        [{"repeat": 1, "assertion": "greeting", "reason": "the judge (grader) failed: RuntimeError: judge backend down"}],
        [],
    ]


# -- item 6: a baseline saved under another model name -------------------------------------------


def test_a_baseline_of_another_model_says_nothing_matched(tmp_path: Path, monkeypatch: Any) -> None:
    from scripted import Script

    models = {"old": Script(lambda call: "Hi").model("old"), "new": Script(lambda call: "Hi").model("new")}
    use_models(monkeypatch, models)
    write(tmp_path / "greet.eval.yaml", "cases:\n  - name: short\n    expect:\n      greeting: {length: {max: 5}}\n")
    template = write(tmp_path / "greet.sd", GREET)
    assert sd("eval", template, "-m", "old", "--json", tmp_path / "old.json").exit_code == 0
    done = sd("eval", template, "-m", "new", "--baseline", tmp_path / "old.json")
    assert (done.exit_code, report(done.output)[-1]) == (
        0, "baseline: nothing to compare: no case of this run is in the baseline (its models: old; this run's: new)",
    )  # fmt: skip


# -- item 8: --model module:factory in the current folder ------------------------------------------

FACTORY = """\
from pydantic_ai.models.test import TestModel


def factory():
    return TestModel(custom_output_text="from the factory")
"""


def _in_folder(tmp_path: Path, monkeypatch: Any) -> None:
    """The test works in `tmp_path`, as a user in their project folder (not on sys.path, as
    under the `sd` script); sys.path and the module imported from there are put back afterwards."""
    import sys

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.setitem(sys.modules, "issue48_mymod", None)  # put back (removed) at the end ...
    del sys.modules["issue48_mymod"]  # ... and importable meanwhile


def test_a_model_factory_in_the_current_folder_is_found(tmp_path: Path, monkeypatch: Any) -> None:
    _in_folder(tmp_path, monkeypatch)
    write(tmp_path / "issue48_mymod.py", FACTORY)
    write(tmp_path / "t.sd", "Say hi [[greeting]]\n")
    done = sd("run", "t.sd", "--model", "issue48_mymod:factory", "--json")
    assert (done.exit_code, done.stdout) == (0, '{\n  "greeting": "from the factory"\n}\n')


MISSING_FACTORY = (
    "cannot use model 'issue48_nomod:factory': 'issue48_nomod' is no pydantic-ai provider, and no module "
    "issue48_nomod was found to call factory() from (looked for issue48_nomod.py or issue48_nomod/__init__.py "
    "in the current folder and on sys.path; PYTHONPATH adds folders). Model strings look like 'openai-chat:gpt-4o-mini'"
)


def test_a_missing_model_factory_says_what_was_looked_for(tmp_path: Path, monkeypatch: Any) -> None:
    _in_folder(tmp_path, monkeypatch)
    write(tmp_path / "t.sd", "Say hi [[greeting]]\n")
    done = sd("batch", "t.sd", "-", "--model", "issue48_nomod:factory", input='{"x": 1}\n')
    assert (done.exit_code, done.output) == (1, f"error: {MISSING_FACTORY}\n")


def test_eval_with_a_model_it_cannot_use_is_one_line_and_exit_2_before_any_run(
    tmp_path: Path, monkeypatch: Any
) -> None:
    _in_folder(tmp_path, monkeypatch)
    write(tmp_path / "greet.eval.yaml", GREET_EVAL.replace("model: grader", "model: 'issue48_nomod:factory'"))
    write(tmp_path / "greet.sd", GREET)
    done = sd("eval", "greet.sd", "--model", "test")
    assert (done.exit_code, done.output) == (2, f"error: greet.eval.yaml: judge model: {MISSING_FACTORY}\n")
    done = sd("eval", "greet.sd", "--model", "issue48_nomod:factory")
    assert (done.exit_code, done.output) == (2, f"error: --model: {MISSING_FACTORY}\n")


# -- item 7: confidence=logprobs in a --model test dry run -------------------------------------------

CONFIDENT = "Classify: {{ t }}\n[[pick:label|good,bad, confidence=logprobs]]\n"
NO_LOGPROBS = (
    "error: slot 'label': confidence=logprobs needs token logprobs, and the test model (a dry run) gives none; "
    "for a dry run use confidence=vote:N, or run on a model that returns logprobs (docs/confidence.md)\n"
)


def test_logprobs_in_a_dry_run_is_one_line_before_any_request(tmp_path: Path) -> None:
    template = write(tmp_path / "conf.sd", CONFIDENT)
    done = sd("run", template, "--model", "test", "-c", "t=hi")
    assert (done.exit_code, done.stderr) == (1, NO_LOGPROBS)


# -- item 9: escalation wording, sd explain ---------------------------------------------------------


def test_sd_run_says_whose_answer_an_escalated_slot_holds(tmp_path: Path, use_model: Any) -> None:
    from scripted import Script

    answers = iter(["x", "y"])
    use_model(Script(lambda call: next(answers)).model("small"))
    template = write(tmp_path / "t.sd", "[[pick:c|x, y, confidence=vote:2, min_confidence=0.9, escalate=test]]\n")
    done = sd("run", template, "--no-stream")
    assert done.exit_code == 0, done.output
    assert "c: confidence 0.50, below min_confidence: answered by test" in done.stdout.splitlines()


def test_sd_explain_shows_the_confidence_options(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", (
        "[[pick:a|x, y, confidence=logprobs, min_confidence=0.8, escalate=openai:gpt-4o]]\n"
        "[[pick:b|x, y, confidence=vote:3, min_confidence=0.6, escalate=approve]]\n"
        "[[pick:c|x, y, confidence=vote:2]]\n"
    ))  # fmt: skip
    done = sd("explain", template)
    assert done.exit_code == 0, done.output
    text = " ".join(line.strip(" │├└─") for line in done.stdout.splitlines())  # the tree's lines wrap
    text = re.sub(r"\s+", " ", text)
    assert (
        "confidence=logprobs (the probability of the answer's tokens); below min_confidence=0.8 the slot is asked "
        "again of openai:gpt-4o (escalate=)"
    ) in text
    assert "confidence=vote:3 (the share of 3 asks that agree); below min_confidence=0.6 the slot waits for a person (escalate=approve)" in text
    assert "confidence=vote:2 (the share of 2 asks that agree) slot" not in text  # one line, no escalation
    assert text.count("confidence=vote:2 (the share of 2 asks that agree)") == 1


CACHED = (
    "A long instruction that every row shares, and every slot after it.\n"
    "Hello {{ name }}.\n[[pick:queue|billing, bug, confidence=logprobs]]\n\nThen [[reply]]\n"
)


def test_explain_cache_without_rows_names_the_variable_that_breaks_the_prefix(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", CACHED)
    done = sd("explain", template, "--cache")
    assert (done.exit_code, done.stderr) == (0, "")  # no "undefined variable" warnings: there is no context
    assert done.stdout.splitlines() == [
        "prompt cache: 1 row, shared prefixes of 1,024+ tokens (OpenAI, llama.cpp); tokens estimated at 4 characters each",
        "  (no --rows: one row with an empty context; every {{ }} of the context taken to differ by row)",
        "  queue  cacheable prefix 21 tokens · predicted cached 0 % of 21 input tokens",
        "  reply  cacheable prefix 29 tokens · predicted cached 0 % of 29 input tokens",
        "  {{ name }} at 2:7 breaks 1 cacheable token for 2 slots",
        "predicted: 0 % of 50 input tokens read from the cache; saving unknown (give --model provider:name or --prices FILE)",
    ]


def test_a_misspelt_check_is_an_error_at_its_place_not_a_subset(tmp_path: Path) -> None:
    """`{contain: hello}` was read as a JSON subset (key `contain`) and failed every run with
    "expected an object"; a key close to a check name is an error before any request."""
    write(tmp_path / "greet.eval.yaml", "cases:\n  - name: a\n    expect:\n      greeting: {contain: hello}\n")
    template = write(tmp_path / "greet.sd", GREET)
    done = sd("eval", template, "--model", "test")
    assert (done.exit_code, done.output) == (2, (
        f"error: {tmp_path / 'greet.eval.yaml'}:4:17: expect.greeting: unknown check 'contain' (did you mean 'contains'?); a mapping "
        "of no check names is a JSON subset of an object answer: write `subset: {contain: …}` if that is what you mean\n"
    ))  # fmt: skip
    write(tmp_path / "greet.eval.yaml", "cases:\n  - name: a\n    expect:\n      greeting: {subset: {contain: hello}}\n")
    assert "expected an object" in sd("eval", template, "--model", "test").output  # said so: a subset it is
