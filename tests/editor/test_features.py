"""What `sd lsp` answers, tested on the functions behind it (the stdio tests cover the protocol)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from struckdown.editor import features as f


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def analyzed(folder: Path, text: str, name: str = "t.sd") -> f.Analysis:
    return f.analyze(text, write(folder, name, text))


def labels(analysis: f.Analysis, offset: int | None = None) -> list[str]:
    return [c.label for c in f.completions(analysis, len(analysis.text) if offset is None else offset)]


def span(analysis: f.Analysis, d: f.Diagnostic) -> str:
    return analysis.text[d.start : d.end]


# -- diagnostics ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "covered", "message"),
    [
        ("Q [[pick:x]]", "[[pick:x]]", "pick needs choices: [[pick:name|a, b, c]]"),
        ("Q [[bool:ok|yes]]", "yes", "bool takes no positional options"),
        ("Q [[colour:x]]", "colour", "unknown type 'colour'"),
        ("Q [[a]]\nR [[a]]", "[[a]]", "duplicate slot key 'a'"),
        ("Q {{ a b }} [[x]]", "Q", None),
    ],
)
def test_a_parse_error_covers_the_token_at_the_parsers_position(
    tmp_path: Path, text: str, covered: str, message: str | None
) -> None:
    import struckdown as sd

    analysis = analyzed(tmp_path, text)
    (diagnostic,) = f.diagnostics(analysis)
    with pytest.raises(sd.TemplateSyntaxError) as caught:
        sd.parse(text)
    assert analysis.lines.position(diagnostic.start) == (caught.value.line, caught.value.column)
    assert span(analysis, diagnostic) == covered
    assert diagnostic.severity == "error"
    if message is not None:
        assert diagnostic.message.split("\nhint:")[0] == message


def test_undefined_variables_are_checked_against_the_context_file_beside_the_template(tmp_path: Path) -> None:
    write(tmp_path, "t.json", json.dumps({"name": "Ada"}))
    analysis = analyzed(tmp_path, "Hi {{ name }}, {{ nmae | upper }}\n[[greeting]]")
    (diagnostic,) = f.diagnostics(analysis)
    assert span(analysis, diagnostic) == "nmae"
    assert diagnostic.message.startswith("undefined variable 'nmae'")


def test_without_a_context_file_variables_are_not_checked(tmp_path: Path) -> None:
    assert f.diagnostics(analyzed(tmp_path, "Hi {{ anyone }} [[x]]")) == []


def test_an_error_inside_an_include_lands_on_the_include_tag(tmp_path: Path) -> None:
    write(tmp_path, "part.sd", "Broken [[pick:x]]\n")
    analysis = analyzed(tmp_path, 'Start\n<include src="part.sd"/>\n[[y]]')
    (diagnostic,) = f.diagnostics(analysis)
    assert span(analysis, diagnostic) == '<include src="part.sd"/>'
    assert diagnostic.message.startswith(f"{tmp_path / 'part.sd'}:1:8: pick needs choices")


def test_guard_placement_warnings_are_reported_like_sd_check(tmp_path: Path) -> None:
    analysis = analyzed(tmp_path, "Q [[a]][[halt:late]]")
    (diagnostic,) = f.diagnostics(analysis)
    assert diagnostic.severity == "warning"
    assert span(analysis, diagnostic) == "[[halt:late]]"


# -- completion -------------------------------------------------------------------


def test_options_of_the_slots_type_complete_after_the_pipe_with_docs(tmp_path: Path) -> None:
    analysis = analyzed(tmp_path, "Q [[number:t|")
    items = f.completions(analysis, len(analysis.text))
    assert [c.label for c in items] == [
        "temperature", "max_tokens", "seed", "top_p", "model", "thinking", "required", "max", "min",
        "use_tools", "max_iter", "max_calls", "tool_timeout", "mcp", "approve", "budget",
        "fallback", "on_truncate", "tool_choice", "parallel_tools", "max_seconds", "prompt_cache", "loop_guard",
    ]
    low = next(c for c in items if c.label == "min")
    assert (low.insert_text, low.detail, low.documentation) == (
        "min=", "type option", "Lowest value allowed (numbers, dates, times, durations).",
    )


def test_options_already_given_are_not_offered_again(tmp_path: Path) -> None:
    assert labels(analyzed(tmp_path, "Q [[reply|temperature=0.2, max_tokens=9, ")) == [
        "seed", "top_p", "model", "thinking", "required", "max_length", "min_length", "pattern",
        "use_tools", "max_iter", "max_calls", "tool_timeout", "mcp", "approve", "budget",
        "fallback", "on_truncate", "tool_choice", "parallel_tools", "max_seconds", "prompt_cache", "loop_guard",
    ]


def test_a_guard_is_offered_when(tmp_path: Path) -> None:
    assert "when" in labels(analyzed(tmp_path, "Q [[halt:stop|"))
    assert "when" not in labels(analyzed(tmp_path, "Q [[bool:stop|"))


def test_option_values_complete_where_they_are_a_closed_set(tmp_path: Path) -> None:
    assert labels(analyzed(tmp_path, "Q [[x|thinking=")) == ["off", "minimal", "low", "medium", "high", "xhigh"]
    assert labels(analyzed(tmp_path, "Q [[x|use_tools=")) == ["true", "false"]
    assert labels(analyzed(tmp_path, "Q [[x|temperature=")) == []


def test_context_variables_and_earlier_answers_complete_inside_jinja(tmp_path: Path) -> None:
    write(tmp_path, "t.yaml", "customer: Ada\nticket: broken\n")
    text = "From {{ customer }}: [[summary]] then {{  }} [[later]]"
    analysis = analyzed(tmp_path, text)
    offset = text.index("{{  }}") + 3
    items = f.completions(analysis, offset)
    assert [(c.label, c.detail) for c in items] == [
        ("customer", "context (t.yaml)"),
        ("ticket", "context (t.yaml)"),
        ("summary", "answer of an earlier slot"),
    ]


def test_tool_names_come_from_the_tools_file_without_running_it(tmp_path: Path) -> None:
    write(
        tmp_path, "t_tools.py",
        "raise SystemExit('never run')\n\ndef lookup(order_id: str) -> str:\n    '''Find an order.'''\n\n"
        "def _private():\n    pass\n",
    )
    analysis = analyzed(tmp_path, "Q [[x|approve=")
    (item,) = f.completions(analysis, len(analysis.text))
    assert (item.label, item.kind, item.detail) == ("lookup", "tool", "tool(order_id: str)")
    assert item.documentation.startswith("Find an order.")


def test_use_tools_documents_the_tools_it_would_get(tmp_path: Path) -> None:
    write(tmp_path, "tools.py", "def lookup(x):\n    pass\n\nasync def refund(x):\n    pass\n")
    analysis = analyzed(tmp_path, "Q [[x|")
    item = next(c for c in f.completions(analysis, len(analysis.text)) if c.label == "use_tools")
    assert item.documentation.endswith("\n\nTools in tools.py: `lookup`, `refund`")


def test_actions_complete_after_the_at_sign(tmp_path: Path) -> None:
    assert labels(analyzed(tmp_path, "[[@")) == ["evidence", "fetch", "history", "markdownify", "noop", "search", "set", "timestamp"]


def test_no_completion_outside_slots_and_jinja_or_for_a_new_key(tmp_path: Path) -> None:
    assert labels(analyzed(tmp_path, "Plain text [[x]] more")) == []
    assert labels(analyzed(tmp_path, "Q [[pick:")) == []


# -- hover and symbols -------------------------------------------------------------


def test_hover_on_a_guard_lists_where_it_is_joined(tmp_path: Path) -> None:
    text = "Is it abusive?\n[[halt:abuse|when=false]]\nAnswer [[reply]]"
    analysis = analyzed(tmp_path, text)
    found = f.hover(analysis, text.index("abuse|"))
    assert found is not None
    assert text[found.start : found.end] == "[[halt:abuse|when=false]]"
    assert found.markdown.splitlines()[0] == "**guard `abuse`**: halts the run when `triggered` is false"
    assert "joined before: the first streamed token" in found.markdown


def test_hover_shows_choices_and_settings(tmp_path: Path) -> None:
    text = "Q [[!pick:c|red, {{ other }}, temperature=0.5]]"
    found = f.hover(analyzed(tmp_path, text), 5)
    assert found is not None
    assert found.markdown.splitlines() == [
        "**slot `c`**: `pick`, one answer, required",
        "- choices: red | {{ other }}",
        "- model settings: `temperature=0.5`",
        "- `{{ … }}` option values are rendered when the slot runs",
    ]


def test_symbols_hold_slots_guards_and_actions_per_segment(tmp_path: Path) -> None:
    text = "A [[@timestamp:now]] [[halt:stop]]\n<checkpoint/>\nB [[int{2}:n]]"
    outline = [
        (s.name, s.kind, [(c.name, c.kind, c.detail) for c in s.children]) for s in f.symbols(analyzed(tmp_path, text))
    ]
    assert outline == [
        ("segment 0", "segment", [("now", "action", "@timestamp"), ("stop", "guard", "halt")]),
        ("segment 1", "segment", [("n", "slot", "int")]),
    ]


def test_symbols_still_come_when_the_template_does_not_parse(tmp_path: Path) -> None:
    (segment,) = f.symbols(analyzed(tmp_path, "Q [[pick:x]] [[colour:y]]"))
    assert [c.name for c in segment.children] == ["x", "y"]


def test_hover_on_a_slot_after_a_guard_names_the_guard_it_joins(tmp_path: Path) -> None:
    text = "Is it abusive?\n[[halt:abuse]]\nAnswer [[reply]]\n<checkpoint>\nLater [[other]]"
    analysis = analyzed(tmp_path, text)
    reply = f.hover(analysis, text.index("reply"))
    other = f.hover(analysis, text.index("other"))
    assert reply is not None and other is not None
    assert reply.markdown.splitlines()[-1] == (
        "- guards that may still be running beside it: `abuse` (joined before its first streamed token)"
    )
    assert "guards" not in other.markdown  # another segment


def test_semantic_tokens_follow_the_roles_and_never_cross_a_line(tmp_path: Path) -> None:
    from struckdown.editor.roles import SEMANTIC_TYPES

    text = "<!-- one\ntwo -->\n[[pick:c|a ,\n b]]"
    analysis = analyzed(tmp_path, text)
    assert [(text[t.start : t.end], SEMANTIC_TYPES[t.type_index]) for t in f.semantic_tokens(analysis)] == [
        ("<!-- one", "comment"), ("two -->", "comment"), ("[[", "operator"), ("pick", "type"), (":", "operator"),
        ("c", "variable"), ("|", "operator"), ("a", "enumMember"), (",", "operator"), ("b", "enumMember"),
        ("]]", "operator"),
    ]
