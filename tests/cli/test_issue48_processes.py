"""Issue 48 through real `sd` processes (marker `process`: .ci/run's process stage): what a
new user typed, as they typed it. The in-process tests of the same items are in
test_issue48.py (the README run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_issue48 import CONFIDENT, FACTORY, MISSING_FACTORY, NO_LOGPROBS, REFUND, REFUND_EVAL, REFUND_TOOLS, write

pytestmark = pytest.mark.process
#: The `sd` the user's shell runs (the console script beside this Python), not `python -m`,
#: which would put the current folder on sys.path for it.
SD = str(Path(sys.executable).parent / "sd")


def sd(args: list[str], cwd: Path, **env: str) -> tuple[int, str, str]:
    """`sd ARGS` in `cwd`, as a user's shell runs it: (exit code, stdout, stderr), times as N."""
    done = subprocess.run(
        [SD, *args], capture_output=True, text=True, check=False, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "HOME": str(cwd), "STRUCKDOWN_CACHE_DIR": str(cwd / "cache"), **env},
    )  # fmt: skip
    seconds = re.compile(r"\d+\.\d+ s\b")
    return done.returncode, seconds.sub("N s", done.stdout), seconds.sub("N s", done.stderr)


def test_eval_approve(tmp_path: Path) -> None:
    """Item 4: `sd eval --approve all|none` decides the calls a template's approve= holds."""
    write(tmp_path / "refund.sd", REFUND), write(tmp_path / "refund.eval.yaml", REFUND_EVAL)
    write(tmp_path / "tools.py", REFUND_TOOLS)
    code, out, _ = sd(["eval", "refund.sd", "--model", "test", "--tools", "tools.py", "--approve", "all"], tmp_path)
    assert (code, out) == (0, (
        "refund.sd · test\n"
        "  ✓ refunded  1/1  100 %  [21–100 %]  $0.0000  N s\n"
        "test: 1/1 cases pass, 0 flaky, 1/1 runs, $0.0000, N s\n"
    ))  # fmt: skip
    code, out, _ = sd(["eval", "refund.sd", "--model", "test", "--tools", "tools.py"], tmp_path)
    assert code == 1
    assert out.splitlines()[-1] == (
        "a run paused for a tool call that needs approval (it failed): --approve all|none decides them"
    )


JUDGES = '''\
from pydantic_ai.models.function import FunctionModel


def down():
    def reply(messages, info):
        raise RuntimeError("judge backend down")

    return FunctionModel(reply, model_name="down")
'''


def test_a_failing_judge_still_gives_the_report_and_json(tmp_path: Path) -> None:
    """Item 5: the judge model fails; the report and --json are written, the judge's error per case."""
    import json

    write(tmp_path / "judges.py", JUDGES)
    write(tmp_path / "greet.sd", "Write a greeting. [[greeting]]\n")
    write(tmp_path / "greet.eval.yaml", (
        "cases:\n  - name: polite\n    expect:\n      greeting: {judge: polite, model: 'judges:down'}\n"
        "  - name: short\n    expect:\n      greeting: {length: {max: 500}}\n"
    ))  # fmt: skip
    code, out, err = sd(["eval", "greet.sd", "--model", "test", "--json", "r.json"], tmp_path)
    assert (code, out) == (1, (
        "greet.sd · test\n"
        "  ✗ polite  0/1    0 %  [0–79 %]  $0.0000  N s\n"
        "      repeat 1: greeting: the judge (judges:down) failed: RuntimeError: judge backend down\n"
        "  ✓ short   1/1  100 %  [21–100 %]  $0.0000  N s\n"
        "  slots: greeting 1/2 (50 %)\n"
        "test: 1/2 cases pass, 0 flaky, 1/2 runs, $0.0000, N s\n"
    )), err  # fmt: skip
    assert "passes" not in err + out
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [c["failures"] for c in saved["cases"]] == [
        [{"repeat": 1, "assertion": "greeting", "reason": "the judge (judges:down) failed: RuntimeError: judge backend down"}],
        [],
    ]


def test_a_baseline_saved_under_another_model_name(tmp_path: Path) -> None:
    """Item 6: every case unmatched is said as such, not as "0 regressed"."""
    import json

    write(tmp_path / "greet.sd", "Write a greeting. [[greeting]]\n")
    write(tmp_path / "greet.eval.yaml", "cases:\n  - name: short\n    expect:\n      greeting: {length: {max: 500}}\n")
    assert sd(["eval", "greet.sd", "--model", "test", "--json", "old.json"], tmp_path)[0] == 0
    saved = json.loads((tmp_path / "old.json").read_text())
    saved["models"] = ["openai:gpt-4o"]
    for case in saved["cases"]:
        case["model"] = "openai:gpt-4o"  # the same report, as if saved with -m openai:gpt-4o
    write(tmp_path / "old.json", json.dumps(saved))
    code, out, _ = sd(["eval", "greet.sd", "--model", "test", "--baseline", "old.json"], tmp_path)
    assert (code, out.splitlines()[-1]) == (0, (
        "baseline: nothing to compare: no case of this run is in the baseline (its models: openai:gpt-4o; this run's: test)"
    ))  # fmt: skip


def test_a_model_factory_in_the_current_folder(tmp_path: Path) -> None:
    """Item 8: `sd run --model mymod:factory` finds ./mymod.py without PYTHONPATH, as `python -m`
    would; a missing one says where it was looked for; in `sd eval` that is exit 2, one line."""
    write(tmp_path / "mymod.py", FACTORY)
    write(tmp_path / "t.sd", "Say hi [[greeting]]\n")
    assert sd(["run", "t.sd", "--model", "mymod:factory", "--json"], tmp_path)[:2] == (
        0, '{\n  "greeting": "from the factory"\n}\n',
    )  # fmt: skip
    write(tmp_path / "t.eval.yaml", "cases:\n  - name: hi\n    expect:\n      greeting: from the factory\n")
    assert sd(["eval", "t.sd", "--model", "mymod:factory"], tmp_path)[:2] == (0, (
        "t.sd · mymod:factory\n"
        "  ✓ hi  1/1  100 %  [21–100 %]  $0.0000  N s\n"
        "  slots: greeting 1/1 (100 %)\n"
        "mymod:factory: 1/1 cases pass, 0 flaky, 1/1 runs, $0.0000, N s\n"
    ))  # fmt: skip
    missing = MISSING_FACTORY.replace("issue48_nomod", "nomod")
    assert sd(["eval", "t.sd", "--model", "nomod:factory"], tmp_path) == (2, "", f"error: --model: {missing}\n")


def test_logprobs_in_a_dry_run(tmp_path: Path) -> None:
    """Item 7: `confidence=logprobs` with `--model test`: one line, before any request."""
    write(tmp_path / "conf.sd", CONFIDENT)
    assert sd(["run", "conf.sd", "--model", "test", "-c", "t=hi"], tmp_path) == (
        1, "failed · 0 answers · 0 requests · 0 tokens (0 in, 0 out) · N s\n", NO_LOGPROBS,
    )  # fmt: skip
