"""Every template error is a TemplateSyntaxError with line:column, before any model call."""

from __future__ import annotations

from pathlib import Path

import pytest

import struckdown as sd
from scripted import Script, echo_last


def error_of(template: str, **kwargs: object) -> sd.TemplateSyntaxError:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        sd.parse(template, **kwargs)  # type: ignore[arg-type]
    return info.value


@pytest.mark.parametrize(
    ("template", "line", "column", "words"),
    [
        ("Hi\n[[colour:x]]", 2, 3, "unknown type 'colour'"),
        ("Hi [[pick:x|a, b, colour=red]]", 1, 19, "unknown option 'colour'"),
        ("[[a]]\ntext\n  [[a]]", 3, 3, "duplicate slot key 'a'"),
        ("[[int:n|max=ten]]", 1, 9, "option max= must be a number"),
        ("[[a|temperature=9]]", 1, 5, "bad value for temperature"),
        ("[[a|thinking=maybe]]", 1, 5, "bad value for thinking"),
        ("x\n</together>", 2, 1, "</together> without <together>"),
        ("x {{ name ", 1, 3, "unclosed '{{'"),
        ("ok\n{{ a + }} [[b]]", 2, 1, "invalid Jinja"),
        ("[[think]]", 1, 3, "ambiguous"),
        ("[[bool:b|pattern=x]]", 1, 10, "unknown option 'pattern'"),
        ("[[bool:b|yes, no]]", 1, 10, "takes no positional options"),
        ("[[pick:p]]", 1, 1, "pick needs choices"),
        ("[[@nothing:x]]", 1, 1, "unknown action @nothing"),
        ("<system loud>x</system>", 1, 1, "unknown <system> modifier 'loud'"),
        ("<together>[[a]] uses {{ b }} [[b]]</together>", 1, 16, "refers to a sibling"),
        ("{% for i in xs %}[[a]]{% endfor %}", 1, 18, "{% for %} around a slot"),
        ("[[a b]]", 1, 4, "in slot"),
        ("text [[a", 1, 6, "never closed"),  # at the [[ left open, not at the end
        ("{% if x %}[[a]]", 1, 1, "never closed"),
        ("Hi [[a]]\n\n[[b|x=1\nmore text", 3, 1, "never closed"),
        ("[[a|max_iter=0]]", 1, 5, "bad value for max_iter"),
        ("[[x{3,1}]]", 1, 4, "m <= n"),
        ("[[a|temperature={{ t | nosuch }}]]", 1, 24, "No filter named 'nosuch'"),  # at the filter's name
        ("x\n{% if a is nosuch %}[[a]]{% endif %}", 2, 12, "No test named 'nosuch'"),
        ("Hi {{ name | nosuch }} [[a]]", 1, 14, "No filter named 'nosuch'"),
        ("{% if a b %}[[a]]{% endif %}", 1, 1, "invalid Jinja expression"),
        ("[[pick:p|x, {{ a b }}]]", 1, 13, "invalid Jinja expression"),
    ],
)
def test_parse_errors_have_positions(template: str, line: int, column: int, words: str) -> None:
    error = error_of(template)
    assert (error.line, error.column) == (line, column), str(error)
    assert words in str(error)


def test_error_message_shows_line_caret_and_hint() -> None:
    error = error_of("Hello\n[[pick:c|a, b, temprature=0.2]]")
    assert error.source_line == "[[pick:c|a, b, temprature=0.2]]"
    assert error.hint is not None and "did you mean 'temperature'" in error.hint
    text = str(error)
    assert "line 2:16: unknown option 'temprature'" in text
    assert "\n    [[pick:c|a, b, temprature=0.2]]\n                   ^" in text


def test_unknown_type_suggests_a_close_match() -> None:
    assert "did you mean 'number'" in (error_of("[[numbr:x]]").hint or "")


def test_no_model_call_happens_for_a_broken_template() -> None:
    script = Script(echo_last())
    with pytest.raises(sd.TemplateSyntaxError):
        sd.complete("Fine [[a]] broken [[b|colour=1]]", model=script.model())
    assert script.calls == []


def test_duplicate_keys_allowed_in_exclusive_branches() -> None:
    program = sd.parse("{% if x %}A [[a]]{% else %}B [[a]]{% endif %}")
    assert program.keys == ("a",)


def test_quoted_option_values_keep_special_characters() -> None:
    program = sd.parse('[[code|pattern="^[A-Z]+, |x$"]] [[pick:p|"a, b", \'c|d\']]')
    plans = {p.key: p for p in program.plans.values()}
    assert plans["code"].type_options == {"pattern": "^[A-Z]+, |x$"}
    assert plans["p"].positional == ("a, b", "c|d")


def test_include_inlines_relative_files(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "intro.sd").write_text("Intro {{ who }} [[intro]]\n")
    main = tmp_path / "main.sd"
    main.write_text('<include src="parts/intro.sd"/>\nNext [[next]]')
    script = Script(echo_last())
    result = sd.complete(main.read_text(), {"who": "Bo"}, model=script.model(), template_path=main)
    assert list(result) == ["intro", "next"]
    assert script.calls[0].last_user == "Intro Bo"


def test_include_missing_file(tmp_path: Path) -> None:
    main = tmp_path / "main.sd"
    error = error_of('x\n<include src="nope.sd"/>', template_path=main)
    assert (error.line, error.column) == (2, 1)
    assert "included file 'nope.sd' not found" in str(error)


def test_include_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.sd").write_text('<include src="b.sd"/>')
    (tmp_path / "b.sd").write_text('<include src="a.sd"/>')
    error = error_of((tmp_path / "a.sd").read_text(), template_path=tmp_path / "a.sd")
    assert "include cycle: a.sd -> b.sd -> a.sd" in str(error)


def test_include_cannot_escape_its_roots(tmp_path: Path) -> None:
    (tmp_path / "secret.sd").write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link.sd").symlink_to(tmp_path / "secret.sd")
    for src in ("../secret.sd", str(tmp_path / "secret.sd"), "link.sd"):
        error = error_of(f'<include src="{src}"/>', template_path=root / "main.sd")
        assert "outside the allowed folders" in str(error), src


def test_include_paths_are_searched(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "common.sd").write_text("<system>Shared rules.</system>")
    program = sd.parse('<include src="common.sd"/>[[a]]', template_path=tmp_path / "t.sd", include_paths=[lib])
    assert program.keys == ("a",)


def test_error_inside_an_included_file_names_that_file(tmp_path: Path) -> None:
    (tmp_path / "bad.sd").write_text("ok\n[[nope:x]]")
    error = error_of('<include src="bad.sd"/>', template_path=tmp_path / "main.sd")
    assert error.filename is not None and error.filename.endswith("bad.sd")
    assert (error.line, error.column) == (2, 3)


def test_parse_is_cached_by_text() -> None:
    assert sd.parse("Same [[a]]") is sd.parse("Same [[a]]")


def test_jinja_nesting_beyond_pythons_limit_fails_at_parse() -> None:
    deep = "{% for x in xs %}" * 21 + "x" + "{% endfor %}" * 21
    error = error_of(f"{deep} [[a]]")
    assert (error.line, error.column) == (1, 1)
    assert "nests too deeply" in str(error)
    shallow = "{% for x in xs %}" * 9 + "x" + "{% endfor %}" * 9  # under the compile-at-parse count
    assert sd.parse(f"{shallow} [[a]]").keys == ("a",)


def test_unknown_filter_inside_an_inline_if_waits_for_the_run_as_in_jinja() -> None:
    """Jinja's compiler lets an unknown filter or test inside `… if … else …` pass (that
    branch may never run); expressions in options and conditions follow the same rule
    as `{% %}` text."""
    program = sd.parse("Hi {{ a | nosuch if c else b }} [[pick:p|{{ x | nosuch if c else [1] }}]]")
    assert program.segments[0].reads == frozenset({"a", "b", "c", "x"})
    assert sd.parse("{% if c %}{{ (a is nosuch) if c else b }}{% endif %} [[a]]").keys == ("a",)


@pytest.mark.parametrize(
    "template",
    [
        "[[pick:x|a,b", "[[x|=3]]", "[[x|a=]]", "[[:x]]", '[[x|a="unclosed]]', "[[x y]]", "{% if x %}[[a]]",
        "<together>[[a]]", "[[x|a=1,,b=2]]", "[[@]]", "</together>", "[[x!?]]", "[[x|a=1\n\n]]", "a\t[[x\t|\t]]",
        "</user>", "<user>hi", "{{ a", "{# c", "<!-- c", "{% if %}", "[[x|a=[1,2]]", "Hi ]] there [[a]]\n[[",
    ],
)
def test_every_parse_error_has_a_hint_and_no_escapes(template: str) -> None:
    error = error_of(template)
    assert error.hint, str(error)
    assert "\\" not in error.message and "Token(" not in error.message, error.message
