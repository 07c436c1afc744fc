"""Issue 40, items 9–11 through `sd`: cache hits say "cached", undefined variables get a
close match (and `--strict` speaks CLI), parser messages say what to write."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd_api
from cli_models import scripted
from cli_support import plain_environment, sd, use_model  # noqa: F401
from struckdown.errors import UndefinedVariableError
from struckdown.lint import check_source


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def check_message(tmp_path: Path, template: str) -> str:
    """`sd check`'s text for a template with one error."""
    result = sd("check", write(tmp_path / "t.sd", template))
    assert result.exit_code == 1, result.output
    return result.stdout


# -- item 9: cache hits say "cached" --------------------------------------------------------------


def test_sd_run_and_sd_batch_say_when_answers_came_from_the_cache(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []

    def reply(prompt: str, info: Any) -> str:
        prompts.append(prompt)
        return "hello"

    use_model(scripted(reply))
    template = write(tmp_path / "t.sd", "Greet {{ name }} [[g]]\n")
    fresh = sd("run", template, "-c", "name=Ann")
    assert fresh.output.splitlines()[-1].startswith("done · 1 answer · 1 request · ")
    again = sd("run", template, "-c", "name=Ann")
    assert again.output.splitlines()[-1].startswith("done · 1 answer (1 cached) · 0 requests · ")
    rows = write(tmp_path / "rows.jsonl", '{"name": "Ann"}\n{"name": "Bo"}\n')
    batch = sd("batch", template, rows)
    assert batch.exit_code == 0
    [summary] = [line for line in batch.stderr.splitlines() if line.startswith("batch: 2 rows")]
    assert summary.startswith("batch: 2 rows: 2 ok · 1 answer cached · 1 request · ")
    assert prompts == ["Greet Ann", "Greet Bo"]


# -- item 10: undefined variables -----------------------------------------------------------------

MISTYPED = "Hello {{ custmer }}, about order {{ order }}. [[reply]]\n"


def test_the_run_warning_names_the_close_context_key(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "ok"))
    result = sd("run", write(tmp_path / "t.sd", MISTYPED), "-c", "customer=Ann", "-c", "order=5")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0] == (
        f"warning: undefined variable 'custmer' (line 1 of {tmp_path / 't.sd'}): not in the context and not answered before; "
        "did you mean 'customer'?"
    )


def test_sd_check_hints_the_close_context_key(tmp_path: Path) -> None:
    template = write(tmp_path / "t.sd", MISTYPED)
    result = sd("check", template, "-c", "customer=Ann", "-c", "order=5")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[:4] == [
        f"{template}:1:10: error: undefined variable 'custmer': not in the context and not answered before",
        "    Hello {{ custmer }}, about order {{ order }}. [[reply]]",
        "             ^",
        "    hint: did you mean 'customer', a key of the context? Or add 'custmer' (sd: -c custmer=…)",
    ]


def test_the_linter_the_language_server_reads_carries_the_hint(tmp_path: Path) -> None:
    [found] = check_source(MISTYPED, tmp_path / "t.sd", {"customer", "order"}, tools_given=False)
    assert (found.line, found.column, found.severity) == (1, 10, "error")
    assert found.hint == "did you mean 'customer', a key of the context? Or add 'custmer' (sd: -c custmer=…)"


def test_the_language_servers_diagnostic_carries_the_hint(tmp_path: Path) -> None:
    from struckdown.editor import features

    (tmp_path / "t.json").write_text('{"customer": "Ann", "order": 5}')  # the context file beside the template
    analysis = features.analyze(MISTYPED, write(tmp_path / "t.sd", MISTYPED))
    (diagnostic,) = features.diagnostics(analysis)
    assert diagnostic.message == (
        "undefined variable 'custmer': not in the context and not answered before\n"
        "hint: did you mean 'customer', a key of the context? Or add 'custmer' (sd: -c custmer=…)"
    )


def test_sd_batch_strict_refuses_a_mistyped_column_before_any_row(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "ok"))
    rows = write(tmp_path / "rows.csv", "customer,order\nAnn,5\nBo,6\n")
    out = tmp_path / "out.jsonl"
    template = write(tmp_path / "t.sd", MISTYPED)
    result = sd("batch", template, rows, "--strict", "-o", out)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: --strict: no input column has 'custmer' (read at line 1 of {template}); did you mean 'customer'? "
        "Columns: customer, order"
    )
    assert prompts == [] and not out.exists()
    loose = sd("batch", template, rows, "-o", out)  # without --strict: a warning, and the rows run
    assert loose.exit_code == 0 and len(prompts) == 2
    assert loose.stderr.splitlines()[0] == (
        f"warning: undefined variable 'custmer' (line 1 of {template}): not in the context and not answered before; "
        "did you mean 'customer'?"
    )


def test_sd_batch_strict_fails_only_the_rows_without_the_name(tmp_path: Path, use_model: Any) -> None:
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "ok"))
    rows = write(tmp_path / "rows.jsonl", '{"custmer": "Ann", "order": 5}\n{"customer": "Bo", "order": 6}\n')
    out = tmp_path / "out.jsonl"
    result = sd("batch", write(tmp_path / "t.sd", MISTYPED), rows, "--strict", "-o", out)
    assert result.exit_code == 1
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row.get("_error") for row in written] == [
        None,
        f"UndefinedVariableError: undefined variable 'custmer' (line 1 of {tmp_path / 't.sd'}): not in the context "
        "and not answered before; did you mean 'customer'? (--strict)",
    ]
    assert prompts == ["Hello Ann, about order 5."]


def test_the_strict_error_speaks_cli_under_sd_and_python_in_python(tmp_path: Path, use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: "ok"))
    result = sd("run", write(tmp_path / "t.sd", MISTYPED), "-c", "customer=Ann", "-c", "order=5", "--strict")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        f"error: UndefinedVariableError: undefined variable 'custmer' (line 1 of {tmp_path / 't.sd'}): not in the context and not "
        "answered before; did you mean 'customer'? (--strict)"
    )
    with pytest.raises(UndefinedVariableError) as info:
        sd_api.complete(MISTYPED, {"customer": "Ann", "order": 5}, model="test", strict_undefined=True)
    assert str(info.value) == (
        "undefined variable 'custmer' (line 1): not in the context and not answered before; did you mean "
        "'customer'? (strict_undefined=True)"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd_api.complete(MISTYPED, {"customer": "Ann", "order": 5}, model="test")
    assert [str(w.message) for w in caught if "custmer" in str(w.message)] == [
        "undefined variable 'custmer' (line 1): not in the context and not answered before; did you mean 'customer'?"
    ]


# -- item 11: parser messages ----------------------------------------------------------------------


def test_a_typo_of_required_gets_a_hint_towards_it(tmp_path: Path) -> None:
    assert check_message(tmp_path, "[[int:age|requird]]\n").splitlines()[1:] == [
        "    [[int:age|requird]]",
        "              ^",
        "    hint: did you mean 'required'? (a bare required marks the slot required); int slots take only key=value "
        "options",
    ]


def test_a_pick_choice_that_is_a_slip_of_required_is_kept_and_warned(tmp_path: Path) -> None:
    template = "[[pick:x|red, blue, requird]]\n[[pick:y|red, required]]\n[[score:z|low, high, requred]]\n"
    found = check_source(template, tmp_path / "t.sd", None, tools_given=False)
    assert [(d.line, d.column, d.severity, d.message, d.hint) for d in found] == [
        (1, 1, "warning", "slot 'x': the choice 'requird' looks like a slip of 'required'",
         "write 'required' to make the slot required; a choice 'requird' is kept as written"),
        (3, 1, "warning", "slot 'z': the choice 'requred' looks like a slip of 'required'",
         "write 'required' to make the slot required; a choice 'requred' is kept as written"),
    ]
    result = sd("check", write(tmp_path / "t.sd", template))
    assert (result.exit_code, result.stdout.splitlines()[0]) == (
        0, f"{tmp_path / 't.sd'}:1:1: warning: slot 'x': the choice 'requird' looks like a slip of 'required'"
    )


@pytest.mark.parametrize(
    ("template", "line", "column", "hint"),
    [
        ("Intro\nHi {{ name|uppr }} [[x]]\n", 2, 12, "did you mean 'upper'?"),
        ("Hi {{ name | upper | trimm }} [[x]]\n", 1, 22, "did you mean 'trim'?"),
        ("{% if x %}a{% endif %}\n{{ name|uppr }} [[x]]\n", 2, 9, "did you mean 'upper'?"),
        ("Intro\n{% if x|lenght > 2 %}\nHi [[x]]\n{% endif %}\n", 2, 9, "did you mean 'length'?"),
        ("[[int:x|max={{ n|intt }}]]\n", 1, 18, "did you mean 'int'?"),
        ("Hi {{ name is sting }} [[x]]\n", 1, 15, "did you mean 'string'?"),
    ],
)
def test_an_unknown_jinja_filter_is_reported_at_its_own_place_with_a_close_match(
    template: str, line: int, column: int, hint: str
) -> None:
    with pytest.raises(sd_api.TemplateSyntaxError) as info:
        sd_api.parse(template)
    assert (info.value.line, info.value.column, info.value.hint) == (line, column, hint)


def test_a_line_break_in_a_slot_is_named_without_a_stray_article(tmp_path: Path) -> None:
    assert check_message(tmp_path, "[[x\ny]]\n").splitlines()[0].endswith(":1:4: error: unexpected line break in slot")


@pytest.mark.parametrize(
    ("template", "column", "fix"),
    [
        ("[[pick:c|a, b|model=x]]", 14, "[[pick:c|a, b, model=x]]"),  # docs/migration.md's example
        ("[[int:x||min=1]]", 9, "[[int:x|min=1]]"),
        ("[[pick:c|a|b]]", 11, "[[pick:c|a, b]]"),
    ],
)
def test_a_second_pipe_gets_the_fix_migration_md_gives(template: str, column: int, fix: str) -> None:
    with pytest.raises(sd_api.TemplateSyntaxError) as info:
        sd_api.parse(template)
    error = info.value
    assert (error.line, error.column) == (1, column)
    assert error.message == "a second '|' in the slot: options follow one '|', separated by commas"
    assert error.hint == f"one pipe, commas: {fix}"


@pytest.mark.parametrize(
    ("template", "column", "message"),
    [
        ("[[pick:c|a, b, a]]", 16, "choice 'a' is given twice"),
        ("[[pick:c|red, blue, Red]]", 21, "choice 'Red' is given twice (the same as 'red': choices ignore case)"),
    ],
)
def test_a_pick_choice_given_twice_is_a_positioned_error(template: str, column: int, message: str) -> None:
    with pytest.raises(sd_api.TemplateSyntaxError) as info:
        sd_api.parse(template)
    assert (info.value.line, info.value.column, info.value.message, info.value.hint) == (
        1, column, message, "remove the second one"
    )
