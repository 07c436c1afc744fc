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


def _sent(call: Call) -> list[Any]:
    from media_support import shape, user_contents

    return [shape(c) for c in user_contents(call.messages)]


def test_the_media_type_of_an_at_file_comes_from_its_bytes_not_its_name(tmp_path: Path, use_model: Any) -> None:
    from media_support import png

    (tmp_path / "fake.png").write_text("just words, not a picture\n", encoding="utf-8")
    (tmp_path / "real.txt").write_bytes(png(2, 2, 90))  # a PNG with a text name: its bytes say image/png
    template = tmp_path / "t.sd"
    template.write_text("{{ fake }}|{{ real }} [[a]]\n", encoding="utf-8")
    script = Script(lambda call: "ok")
    use_model(script.model())

    result = sd("run", template, "-c", f"fake=@{tmp_path / 'fake.png'}", "-c", f"real=@{tmp_path / 'real.txt'}",
                "--no-cache")

    assert result.exit_code == 0, result.output
    assert _sent(script.calls[0]) == [["just words, not a picture\n|", ("binary", "image/png", png(2, 2, 90))]]


def test_an_at_path_that_is_not_a_regular_file_is_refused_as_such(tmp_path: Path, use_model: Any) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # nobody writes to it: reading it would wait for ever
    (tmp_path / "folder").mkdir()
    template = tmp_path / "t.sd"
    template.write_text("{{ x }} [[a]]\n", encoding="utf-8")
    script = Script(lambda call: "ok")
    use_model(script.model())

    for path, kind in ((fifo, "a FIFO"), (tmp_path / "folder", "a directory"), (Path("/dev/zero"), "a character device")):
        result = sd("run", template, "-c", f"x=@{path}")
        assert result.exit_code == 2, result.output
        assert f"error: -c x=@…: {path} is not a regular file ({kind})" in result.stderr
    missing = sd("run", template, "-c", f"x=@{tmp_path / 'nope'}")
    assert f"error: -c x=@…: no such file: {tmp_path / 'nope'}" in missing.stderr
    assert script.calls == []


def test_a_vote_may_not_ask_more_often_than_the_slots_request_limit(tmp_path: Path, use_model: Any) -> None:
    """Issue 47, fourth probe: `confidence=vote:5000` made 5,000 requests from one slot (its
    request limit is 20), on whatever keys the host runs with."""
    script = Script(lambda call: "x")
    use_model(script.model())
    template = tmp_path / "t.sd"
    template.write_text("Which?\n[[pick:p|x, y, confidence=vote:5000]]\n", encoding="utf-8")

    result = sd("run", template, "--no-cache")

    assert result.exit_code == 2, result.output
    assert (f"{template}:2:27: slot 'p': confidence=vote:5000 asks 5,000 times, more than the slot's request "
            "limit of 20") in result.stderr
    assert script.calls == []
