"""Issue 47 (SPEC §30), through the CLI: `sd eval` counts its runs and bounds YAML aliases
before any call; `-c x=@path` reads the media type from the bytes and refuses what is not
a regular file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cli_support import plain_environment, sd, use_model  # noqa: F401
from scripted import Call, Script

TEMPLATE = "Say yes [[answer]]\n"


def _eval(tmp_path: Path, text: str) -> Path:
    (tmp_path / "coin.sd").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "coin.eval.yaml").write_text(text, encoding="utf-8")
    return tmp_path / "coin.sd"


def test_sd_eval_counts_cases_models_and_repeats_before_any_call(tmp_path: Path, use_model: Any) -> None:
    script = Script(lambda call: "yes")
    use_model(script.model("m"))
    template = _eval(tmp_path, "models: [m, m2]\nrepeat: 1000000000\ncases:\n"
                               "  - {name: a, expect: {answer: 'yes'}}\n  - {name: b, expect: {answer: 'yes'}}\n")

    result = sd("eval", template)

    assert result.exit_code == 2, result.output
    assert (f"{tmp_path / 'coin.eval.yaml'}: 2 cases × 2 models × 1,000,000,000 repeats = 4,000,000,000 runs, "
            "more than --max-runs 10,000") in result.output
    assert script.calls == []
    assert "Traceback" not in result.output


def test_max_runs_is_the_users_to_raise_or_lower(tmp_path: Path, use_model: Any) -> None:
    script = Script(lambda call: "yes")
    use_model(script.model("m"))
    template = _eval(tmp_path, "repeat: 3\ncases:\n  - {name: a, expect: {answer: 'yes'}}\n")

    lowered = sd("eval", template, "-m", "m", "--max-runs", "2")
    assert lowered.exit_code == 2
    assert "1 case × 1 model × 3 repeats = 3 runs, more than --max-runs 2" in lowered.output
    assert script.calls == []
    fine = sd("eval", template, "-m", "m", "--max-runs", "3")
    assert fine.exit_code == 0, fine.output
    assert len(script.calls) == 3


def test_a_yaml_alias_bomb_is_a_positioned_error_not_a_memory_error(tmp_path: Path, use_model: Any) -> None:
    script = Script(lambda call: "yes")
    use_model(script.model("m"))
    levels = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for previous, name in zip("abcdef", "bcdefg"):
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")  # 9**7 values at g
    text = "\n".join(f"      {line}" for line in levels)
    template = _eval(tmp_path, f"cases:\n  - name: bomb\n    context:\n{text}\n    expect: {{answer: 'yes'}}\n")

    result = sd("eval", template, "-m", "m")

    assert result.exit_code == 2, result.output
    assert (f"{tmp_path / 'coin.eval.yaml'}:10:10: yaml: the aliases here expand to more than 1,000,000 values "
            "(an alias bomb?); write the values out") in result.output
    assert script.calls == []
    assert "MemoryError" not in result.output
