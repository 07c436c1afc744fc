"""The Jinja sandbox and the include roots (SPEC §2.4): escape attempts fail, nothing leaks.

Template text, `{% if %}` conditions and `{{ … }}` option values are rendered by
`struckdown.render.Sandbox` (Jinja's `ImmutableSandboxedEnvironment`, plus: unsafe
attributes are errors rather than empty strings, `*`/`**` cannot build huge values,
and nothing is evaluated while parsing). `<include>` reads only inside the
template's folder and `include_paths`.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from jinja2.exceptions import SecurityError

import struckdown as sd
from scripted import Script
from struckdown.render import Renderer

SECRET = "s3cr3t-value-9d1c"


class Account:
    """A context object with something worth stealing."""

    def __init__(self) -> None:
        self.name = "acct"
        self._password = SECRET

    def close(self) -> str:
        return "closed"


def render_text(source: str, variables: Any) -> str:
    return Renderer().render_text(source, variables)


def parse_template(text: str, **where: Any) -> Any:
    """The whole pipeline on a fresh Environment (no cache)."""
    return sd.Environment().parse(text, **where).template


def context() -> dict[str, object]:
    return {"x": Account(), "d": {"k": 1}, "items": [1, 2], "s": "text"}


ESCAPES = [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ().__class__.__bases__[0].__subclasses__() }}",
    "{{ x.__class__ }}",
    "{{ x.__dict__ }}",
    "{{ x._password }}",
    "{{ x.__init__.__globals__ }}",
    "{{ x.__getattribute__('_password') }}",
    "{{ x.__reduce_ex__(2) }}",
    "{{ cycler.__init__.__globals__.os.environ }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ lipsum.__globals__ }}",
    "{{ lipsum.__globals__['os'].popen('id').read() }}",
    "{{ lipsum.__code__ }}",
    "{{ self.__init__.__globals__ }}",
    "{{ '{0.__class__}'.format(x) }}",
    "{{ '{0._password}'.format(x) }}",
    "{{ '{0.__class__.__mro__}'.format('') }}",
    "{{ s|attr('__class__') }}",
    "{{ (x|attr('__class__')).__mro__ }}",
    "{{ x.close.__self__ }}",
    "{{ items.pop() }}",
    "{{ d.clear() }}",
    "{% set y = [] %}{{ y.append(1) }}",
    "{{ d.update({'k': 2}) }}",
]


def rendering_error(template: str) -> sd.TemplateRuntimeError:
    script = Script(lambda call: "ok")
    ctx = context()
    with pytest.raises(sd.TemplateRuntimeError) as info:
        sd.complete(template, ctx, model=script.model())
    assert script.calls == []  # failed before any model call
    assert ctx["d"] == {"k": 1} and ctx["items"] == [1, 2]  # nothing mutated
    return info.value


@pytest.mark.parametrize("expression", ESCAPES)
def test_escape_attempts_in_text_fail_with_a_clear_error(expression: str) -> None:
    error = rendering_error(f"Before {expression} after [[a]]")
    text = str(error)
    assert "SecurityError" in text and "unsafe" in text, text
    assert SECRET not in text and "environ" not in text.replace("environ }}", "")


CONDITIONS = ["''.__class__", "x.__class__", "x._password", "x.__init__.__globals__", "lipsum.__globals__",
              "'{0._password}'.format(x)", "items.pop()", "d.clear()"]  # fmt: skip


@pytest.mark.parametrize("condition", CONDITIONS)
def test_escape_attempts_in_conditions_fail_with_a_clear_error(condition: str) -> None:
    error = rendering_error(f"{{% if {condition} %}}[[a]]{{% endif %}} [[b]]")
    assert "unsafe" in str(error) and SECRET not in str(error)


@pytest.mark.parametrize("expression", ESCAPES[:8])
@pytest.mark.parametrize("slot", ["[[pick:p|{e}]]", "[[a|temperature={e}]]", "[[@set:k|{e}]]"])
def test_escape_attempts_in_option_values_fail_before_any_model_call(slot: str, expression: str) -> None:
    """`{{ … }}` option values are rendered in the same sandbox when the slot runs.

    (They currently surface as jinja2's SecurityError itself, not wrapped in
    TemplateRuntimeError like text and conditions: see docs/security.md.)"""
    script = Script(lambda call: "ok")
    template = "Q " + slot.format(e=expression)
    with pytest.raises((SecurityError, sd.TemplateRuntimeError)) as info:
        sd.complete(template, context(), model=script.model())
    assert script.calls == []
    assert "unsafe" in str(info.value) and SECRET not in str(info.value)


def test_unsafe_attributes_are_errors_not_empty_strings() -> None:
    """Plain Jinja renders `{{ ''.__class__ }}` as an empty string in its sandbox;
    struckdown makes it an error, so a probing template cannot fail silently."""
    with pytest.raises(SecurityError, match="'__class__' of 'str' object is unsafe"):
        render_text("{{ ''.__class__ }}", {})
    with pytest.raises(SecurityError, match="'_password' of 'Account' object is unsafe"):
        render_text("{{ '{0._password}'.format(x) }}", {"x": Account()})
    assert render_text("{{ x.name }} {{ d.k }} {{ items|length }} {{ s.upper() }}", context()) == "acct 1 2 TEXT"


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("{{ range(10**10)|list|length }}", "Range too big"),
        ("{{ 'a' * 10**9 }}", "longer than"),
        ("{{ 10**9 * 'a' }}", "longer than"),
        ("{{ [0] * 10**9 }}", "longer than"),
        ("{{ (items * 600000)|length }}", "longer than"),
        ("{{ 2**(10**7) }}", "larger than"),
        ("{{ 7**(10**8) }}", "larger than"),
    ],
)
def test_resource_bombs_fail_with_a_clear_error(expression: str, words: str) -> None:
    error = rendering_error(f"{expression} [[a]]")
    assert words in str(error)


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}[[a]]",
        "{% for i in items %}{% for j in range(99999) %}{% for k in range(99999) %}{% endfor %}{% endfor %}{% endfor %}[[a]]",
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}[[a]]",
        "{% for i in range(99999) %}{{ s.upper() }}{{ s.lower() }}{{ s.title() }}{% endfor %}[[a]]",
    ],
)
def test_nested_loops_and_recursive_macros_stop_at_the_work_limit(template: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 7: one rendering does at most MAX_STEPS loop steps and calls, so a
    template cannot hold the event loop for hours; the error says what happened. (A
    lower limit here keeps the suite fast; the default is checked below.)"""
    import struckdown.render as render

    monkeypatch.setattr(render, "MAX_STEPS", 20_000)
    error = rendering_error(template)
    assert "the template did too much work: more than 20,000 loop steps and calls in one rendering" in str(error)


def test_the_work_limit_is_per_rendering_and_the_host_may_raise_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import struckdown.render as render

    assert (render.MAX_STEPS, render.MACRO_STEPS) == (250_000, 50)  # docs/security.md
    monkeypatch.setattr(render, "MAX_STEPS", 20_000)
    loops = "{% for i in range(100) %}{% for j in range(190) %}{% endfor %}{% endfor %}done"  # 19,100 steps
    renderer = Renderer()
    assert [renderer.render_text(loops, {}) for _ in range(3)] == ["done"] * 3  # each rendering starts afresh
    monkeypatch.setattr(render, "MAX_STEPS", 1_000)
    with pytest.raises(SecurityError, match="more than 1,000 loop steps"):
        renderer.render_text(loops, {})
    monkeypatch.setattr(render, "MAX_STEPS", 10**6)
    assert renderer.render_text(loops.replace("190", "1900"), {}) == "done"
    macros = "{% macro f() %}{% endmacro %}{% for i in range(21) %}{{ f() }}{% endfor %}"  # range() + 21 + 21 x 50 steps
    monkeypatch.setattr(render, "MAX_STEPS", 1_072)
    assert renderer.render_text(macros, {}) == ""
    monkeypatch.setattr(render, "MAX_STEPS", 1_071)
    with pytest.raises(SecurityError, match="more than 1,071 loop steps"):
        renderer.render_text(macros, {})


def test_loops_keep_their_loop_variable_filters_and_else() -> None:
    text = (
        "{% for x in items if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ '!' if loop.last }}{% endfor %}"
        "{% for x in [] %}no{% else %}empty{% endfor %}"
        "{% for k, v in d|dictsort %}{{ k }}={{ v }}{% endfor %}"
        "{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }}){% endif %}{% endfor %}"
    )
    tree = [{"name": "a", "kids": [{"name": "b", "kids": []}, {"name": "c", "kids": []}]}]
    assert render_text(text, {"items": [1, 2, 3], "d": {"k": 1, "j": 2}, "tree": tree}) == "1/22/2!emptyj=2k=1a(bc)"


@pytest.mark.parametrize("call", ["lipsum(n=10**7)", "lipsum(2, max=10**7)", "lipsum(1, min=10**7, max=10**7)"])
def test_lipsum_writes_a_bounded_amount(call: str) -> None:
    error = rendering_error(f"{{{{ {call} }}}} [[a]]")
    assert "lipsum() writes at most 100 paragraphs of at most 1,000 words" in str(error)
    assert render_text("{{ lipsum(2, html=False, min=5, max=6).count('.') > 0 }}", {}) == "True"


def test_ordinary_arithmetic_still_works() -> None:
    assert render_text("{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] * 2 }} {{ 2 ** 10 }} {{ 6 * 7 }} {{ 2.5 ** 2 }}", {}) == (
        "ababab xxx [1, 1] 1024 42 6.25"
    )


@pytest.mark.parametrize(
    "template",
    [
        "Text {{ [0] * 10**8 }} [[a]]",
        "Text {{ 'a' * 10**8 }} [[a]]",
        "Text {{ 'x'|center(10**8) }} [[a]]",
        "Text {{ '%100000000s' % 1 }} [[a]]",
        "Text {{ 9**9**9 }} [[a]]",
        "{% if [0] * 10**8 %}[[a]]{% endif %}",
        "{% if 'x'|center(10**8) %}[[a]]{% endif %}",
        "[[a|temperature={{ [0] * 10**8 }}]]",
        "[[pick:a|{{ 'x'|center(10**8) }}]]",
    ],
)
def test_parsing_never_evaluates_expressions(template: str) -> None:
    """Jinja folds constant expressions while compiling; that would run bombs (minutes,
    gigabytes) at parse time, before the caller has decided to run anything."""
    parse_template("warm up {{ 1 }} [[a]]")
    tracemalloc.start()
    started = time.thread_time()
    try:
        parse_template(template)
        cpu = time.thread_time() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cpu < 0.5 and peak < 20_000_000, (cpu, peak)


def test_huge_integer_literals_are_syntax_errors() -> None:
    with pytest.raises(sd.TemplateSyntaxError, match="invalid Jinja"):
        parse_template("{{ " + "1" * 5000 + " }} [[a]]")
    with pytest.raises(sd.TemplateSyntaxError, match="invalid Jinja expression"):
        parse_template("[[a|temperature={{ " + "1" * 5000 + " }}]]")


# -- Jinja's own loaders: there are none ---------------------------------------------


@pytest.mark.parametrize(
    "tag", ["{% include 'secret.sd' %}", "{% import 'secret.sd' as s %}", "{% extends 'secret.sd' %}",
            "{% from 'secret.sd' import x %}"],  # fmt: skip
)
def test_jinja_include_import_and_extends_cannot_read_files(tag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret.sd").write_text(SECRET)
    monkeypatch.chdir(tmp_path)
    error = rendering_error(f"{tag} [[a]]")
    assert "no loader" in str(error) and SECRET not in str(error)


# -- <include> roots -----------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/secret.sd (outside), tmp/root/{main.sd, ok.sd, sub/…}, tmp/lib (an include path)."""
    (tmp_path / "secret.sd").write_text(f"{SECRET} [[stolen]]")
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "ok.sd").write_text("Fine [[fine]]")
    (root / "sub" / "inner.sd").write_text('<include src="../ok.sd"/>')
    (root / "sub" / "sneaky.sd").write_text('<include src="../../secret.sd"/>')
    (root / "linked_dir").symlink_to(tmp_path, target_is_directory=True)
    (root / "good_link.sd").symlink_to(root / "ok.sd")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "shared.sd").write_text("Shared [[shared]]")
    (tmp_path / "lib" / "escape.sd").symlink_to(tmp_path / "secret.sd")
    return root


def include_error(src: str, root: Path, **kwargs: object) -> sd.TemplateSyntaxError:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template(f'Start\n<include src="{src}"/>', template_path=root / "main.sd", **kwargs)  # type: ignore[arg-type]
    assert SECRET not in str(info.value)
    return info.value


@pytest.mark.parametrize(
    "src",
    ["../secret.sd", "./../secret.sd", "sub/../../secret.sd", "linked_dir/secret.sd", "linked_dir/root/../secret.sd"],
)
def test_include_cannot_climb_out_of_its_root(src: str, tree: Path) -> None:
    error = include_error(src, tree)
    assert "outside the allowed folders" in error.message
    assert (error.line, error.column) == (2, 1)


def test_include_cannot_use_an_absolute_path_outside(tree: Path) -> None:
    assert "outside the allowed folders" in include_error(str(tree.parent / "secret.sd"), tree).message


def test_nested_include_cannot_climb_out_either(tree: Path) -> None:
    error = include_error("sub/sneaky.sd", tree)
    assert "outside the allowed folders" in error.message
    assert error.filename is not None and error.filename.endswith("sneaky.sd")


def test_include_paths_are_roots_but_their_symlinks_cannot_escape(tree: Path) -> None:
    lib = tree.parent / "lib"
    program = parse_template('<include src="shared.sd"/>', template_path=tree / "main.sd", include_paths=[lib])
    assert [n.key for n in program.nodes if hasattr(n, "key")] == ["shared"]
    assert "outside the allowed folders" in include_error("escape.sd", tree, include_paths=[lib]).message


def test_includes_inside_the_root_work_through_dotdot_and_symlinks(tree: Path) -> None:
    for src in ("sub/inner.sd", "good_link.sd", "sub/../ok.sd", str(tree / "ok.sd")):
        template = parse_template(f'<include src="{src}"/>', template_path=tree / "main.sd")
        assert any(getattr(n, "key", None) == "fine" for n in template.nodes), src


def test_without_a_template_path_the_root_is_the_working_directory(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tree)
    assert any(getattr(n, "key", None) == "fine" for n in parse_template('<include src="ok.sd"/>').nodes)
    with pytest.raises(sd.TemplateSyntaxError, match="outside the allowed folders"):
        parse_template('<include src="../secret.sd"/>')


def test_home_and_variables_are_not_expanded(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tree.parent))
    monkeypatch.setenv("SECRET_DIR", str(tree.parent))
    for src in ("~/secret.sd", "$SECRET_DIR/secret.sd", "${SECRET_DIR}/secret.sd", "%2e%2e/secret.sd"):
        assert "not found" in include_error(src, tree).message, src


def test_include_src_with_jinja_is_not_rendered(tree: Path) -> None:
    """`src` is a literal: a context value can never choose which file is read."""
    error = include_error("{{ path }}", tree)
    assert "not found" in error.message
    assert os.path.exists(tree.parent / "secret.sd")


def test_option_and_action_expressions_fail_as_template_runtime_errors() -> None:
    import jinja2.exceptions

    from scripted import Script

    script = Script(lambda call: "x")
    for template in ("[[pick:p|{{ ''.__class__ }}]]", "[[a|temperature={{ x.__class__ }}]]",
                     "[[@set:k|{{ ''.__class__ }}]]"):
        with pytest.raises(sd.TemplateRuntimeError) as info:
            sd.complete(template, {"x": 1}, model=script.model())
        assert isinstance(info.value.__cause__, jinja2.exceptions.SecurityError), template
    with pytest.raises(sd.TemplateRuntimeError):
        sd.complete("[[a|pattern={{ p }}]]", {"p": "a{99999999999}"}, model=script.model())
    assert script.calls == []


def test_runtime_errors_keep_their_cause() -> None:
    import jinja2.exceptions

    from scripted import Script

    with pytest.raises(sd.TemplateRuntimeError) as info:
        sd.complete("{{ ''.__class__.__mro__ }} [[a]]", model=Script(lambda c: "x").model())
    assert isinstance(info.value.__cause__, jinja2.exceptions.SecurityError)


def test_a_context_key_named_self_breaks_no_expression() -> None:
    """Issue 24 item 13: {{ }} options, actions and {% if %} around slots are evaluated
    with the context as one mapping, so a key named `self` is just a key."""
    script = Script(lambda call: "ok")
    template = "{% if x > 1 %}Q [[a|temperature={{ x / 10 }}]]{% endif %} [[@set:b|{{ x }}]]"
    result = sd.complete(template, {"self": "me", "x": 2}, model=script.model())
    assert dict(result) == {"a": "ok", "b": 2}
    assert script.calls[0].info.model_settings is not None and script.calls[0].info.model_settings["temperature"] == 0.2


def test_an_include_bomb_is_a_positioned_error_not_a_hang(tmp_path: Path) -> None:
    """Issue 24 item 7: six small files that each include the next ten times would inline
    a million copies; the parse stops at the include cap, at the <include> tag."""
    for level in range(6):
        body = "x" if level == 5 else "".join(f'<include src="f{level + 1}.sd"/>' for _ in range(10))
        (tmp_path / f"f{level}.sd").write_text(body, encoding="utf-8")
    main = tmp_path / "main.sd"
    main.write_text('Top\n<include src="f0.sd"/> [[a]]\n', encoding="utf-8")
    with pytest.raises(sd.TemplateSyntaxError, match="more than 1,000 includes") as info:
        sd.Environment().parse(main.read_text(encoding="utf-8"), template_path=main)
    assert info.value.line >= 1 and info.value.hint is not None


@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(1000) %}{{ range(99999)|join }}{% endfor %}[[a]]",
        "{% for i in range(1000) %}{{ range(99999)|sum }}{% endfor %}[[a]]",
        "{% for i in range(1000) %}{{ range(99999)|list|length }}{% endfor %}[[a]]",
        "{% set big = range(99999)|list %}{% for i in range(1000) %}{{ big|join }}{% endfor %}[[a]]",
    ],
)
def test_a_filter_over_a_large_collection_inside_a_loop_counts_toward_the_work_limit(
    template: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 N19: each loop step and the range() call counted, but `|join` over 100,000
    items did not, so 1,000 steps did 10^8 items of work unchecked."""
    import struckdown.render as render

    monkeypatch.setattr(render, "MAX_STEPS", 20_000)
    error = rendering_error(template)
    assert "the template did too much work: more than 20,000 loop steps and calls in one rendering" in str(error)


def test_filters_count_their_collection_once_and_text_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    import struckdown.render as render

    renderer = Renderer()
    monkeypatch.setattr(render, "MAX_STEPS", 1 + 300 + 300)  # range(), join over 300 items, sum over 300 items
    assert renderer.render_text("{{ range(300)|join(',')|length }} {{ items|sum }}", {"items": [1] * 300}) == "1089 300"
    monkeypatch.setattr(render, "MAX_STEPS", 600)
    with pytest.raises(SecurityError, match="more than 600 loop steps"):
        renderer.render_text("{{ range(300)|join(',')|length }} {{ items|sum }}", {"items": [1] * 300})
    monkeypatch.setattr(render, "MAX_STEPS", 10)
    assert renderer.render_text("{{ text|upper|length }}", {"text": "x" * 100_000}) == "100000"


def test_the_globals_known_without_jinja_are_the_sandboxes() -> None:
    """A bare `{{ name }}` is checked without building the sandbox (SPEC §28), so the names
    that are not context variables must be exactly the sandbox's globals."""
    import struckdown.render as render

    renderer = Renderer()
    assert renderer.expression_names(" name ") == frozenset({"name"})
    assert renderer.expression_names("range") == frozenset()  # a global, not a variable
    assert renderer._sandbox is None or set(renderer.sandbox.globals) == render.JINJA_GLOBALS
    assert set(Renderer().sandbox.globals) == render.JINJA_GLOBALS
    assert Renderer().referenced_names("Hi {{ who.name }} and {{ cycler }}") == frozenset({"who"})
