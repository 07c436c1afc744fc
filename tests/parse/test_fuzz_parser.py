"""Parser fuzzing: any input parses or raises a positioned TemplateSyntaxError, fast.

Two generators feed one oracle (`check_template`):

* grammar-aware generation from the SPEC §2 syntax (text, `{{ }}`, slots of every
  form with options, quantifiers and quotes, tags with modifiers, checkpoints,
  together, if/for blocks, comments, includes), with stray and missing closers;
* mutation of realistic templates (`examples/*.sd` plus a built-in list): random
  insertions, deletions, swaps and duplications of characters and tokens.

The oracle: a fresh `Environment().parse` (syntax → check → plan, no cache shared with `struckdown.parse`)
either succeed or raise `struckdown.TemplateSyntaxError` whose line/column lie inside
the file it names (or the template), with the matching source line, a one-line
message and hint, and that pickles; nothing else may escape, and no case may take a
second of CPU. `python -m bench.fuzz --cases N` drives the same strategies for large N.
"""

from __future__ import annotations

import pickle
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from depth import cases

import struckdown as sd

ROOT = Path(__file__).resolve().parents[2]
TIME_LIMIT_S = 1.0

# -- the oracle ------------------------------------------------------------------


def parse_template(text: str, **where: Any) -> sd.Program:
    """The whole pipeline on a fresh Environment, so no case is served from a cache."""
    return sd.Environment().parse(text, **where)



class FuzzFailure(AssertionError):
    """The parser broke its contract on one input."""


def _lines_of(text: str) -> list[str]:
    return text.split("\n")  # the parser counts "\n" only, like the Lark lexer


def check_position(error: sd.TemplateSyntaxError, text: str, template_path: Path | None) -> None:
    """The error points at a real spot of the file it names (or of the template)."""
    source = text
    if error.filename is not None and (template_path is None or Path(error.filename) != template_path):
        source = Path(error.filename).read_text(encoding="utf-8")
    lines = _lines_of(source)
    where = f"{error.filename or '<template>'}:{error.line}:{error.column} ({len(lines)} lines)"
    if not 1 <= error.line <= len(lines) + 1:
        raise FuzzFailure(f"line out of range: {where}: {error.message}")
    if error.line <= len(lines):
        line = lines[error.line - 1]
        if not 1 <= error.column <= len(line) + 1:
            raise FuzzFailure(f"column out of range (line has {len(line)} chars): {where}: {error.message}")
        if error.source_line != line.removesuffix("\r"):
            raise FuzzFailure(f"source_line is not line {error.line}: {error.source_line!r} vs {line!r}")
    elif error.column != 1:
        raise FuzzFailure(f"column past the end of the file: {where}")
    if not error.message or "\n" in error.message:
        raise FuzzFailure(f"message is not one line: {error.message!r}")
    if error.hint is not None and "\n" in error.hint:
        raise FuzzFailure(f"hint is not one line: {error.hint!r}")
    str(error)  # formatting never fails
    copy = pickle.loads(pickle.dumps(error))
    if (copy.line, copy.column, copy.message, copy.filename) != (error.line, error.column, error.message, error.filename):
        raise FuzzFailure("TemplateSyntaxError does not survive pickling")


def check_template(
    text: str, *, template_path: Path | None = None, include_paths: Sequence[Path] = ()
) -> str:
    """'parsed' or 'rejected'; raises FuzzFailure (or the stray exception) otherwise.

    The time bound is on this thread's CPU time, so a busy machine cannot fail a case;
    a runaway regex or loop burns CPU and does."""
    started = time.thread_time()
    try:
        parse_template(text, template_path=template_path, include_paths=include_paths)
        outcome = "parsed"
    except sd.TemplateSyntaxError as error:
        check_position(error, text, template_path)
        outcome = "rejected"
    elapsed = time.thread_time() - started
    if elapsed >= TIME_LIMIT_S:
        raise FuzzFailure(f"took {elapsed:.2f} s of CPU ({len(text)} chars)")
    return outcome


# -- grammar-aware generation ----------------------------------------------------
#
# Generators are plain functions of a `random.Random`: hypothesis drives them through
# `st.randoms()` (each choice is a recorded, shrinkable draw) and bench/fuzz.py through
# a seeded `random.Random` (fast, for large N). Most choices produce valid syntax; each
# piece goes wrong with a small probability, so a template is valid about half the time.

TYPE_NAMES = [
    "respond", "extract", "think", "speak", "pick", "bool", "int", "number", "date",
    "datetime", "time", "duration", "json", "record", "score", "halt",
]  # fmt: skip
IDENTS = ["a", "b", "c", "answer", "x1", "_k", "reply", "plan", "team", "Name2", "summary", "ok", "n", "items2"]
BAD_IDENTS = ["1x", "a-b", "é", "", "a b", "think", "pick", "x.y"]
ACTIONS = ["set", "timestamp", "fetch"]
OPTION_KEYS = [
    "temperature", "max_tokens", "seed", "top_p", "model", "thinking", "required", "min", "max",
    "min_length", "max_length", "pattern", "use_tools", "max_iter", "max_calls", "when",
]  # fmt: skip
GOOD_VALUES = {
    "temperature": ["0", "0.2", "1", "2"], "max_tokens": ["1", "80"], "seed": ["0", "42", "-1"],
    "top_p": ["0.9", "1"], "model": ["gpt-4o", '"openai:gpt-4o-mini"'], "thinking": ["off", "low", "high"],
    "required": ["true", "false"], "min": ["0", "1", "-3", '"2024-01-01"'], "max": ["10", "99.5", '"17:00"'],
    "min_length": ["0", "2"], "max_length": ["5", "100"], "pattern": ['"^[A-Z]+$"', "'a|b'", '"x, y"'],
    "use_tools": ["true", "false"], "max_iter": ["1", "3"], "max_calls": ["0", "2"], "when": ["true", "false"],
}  # fmt: skip
BAD_VALUES = [
    "1e999", "nan", "1" * 5000, "9" * 30, "-0", ".5", "2.", "x y", '"unclosed', "'unclosed", "{{ x", "a{2}",
    "=", "", "[", "]", "true", "tenish", '"a{99999999999}"', '"("', "{{ a + }}",
]  # fmt: skip
CHOICES = ["red", "green", "blue", '"a, b"', "'c|d'", '"[x]"', "low", "high", "a b"]
WS = ["", "", "", "", " ", "  ", "\t", "\n", " \r\n"]
ODD_CHARS = (
    "[]<>{}%#|@:,=!?*+-_/\\'\"`~^$&;()"
    "\n\n\r\t \x00\x0b\x0c\x85\u2028\u2029\u200b\u200d\u202e\u2066\ufeff\ud800\udfff"
    "éß中😀"
)
PROSE = ["Hello.", "Q1:", "Then", "use", "the answer", "- item", "[link](x)", "# Title", "**bold**", "a < b", "x > y",
         "1 [2] 3", "{not jinja", "50%", "a|b", "key: value", "C:\\path", "e.g.", "(see above)"]  # fmt: skip
JINJA_ATOMS = ["x", "a", "b", "choices", "msg", "items", "user.name", "xs[0]", "none", "true", "0", "42",
               '"quoted, [with] |specials|"', "'single'", "[1, 2]", "{'k': 1}", "range(3)"]  # fmt: skip
JINJA_OPS = [" + ", " ~ ", " and ", " or ", " == ", " if x else ", " in "]
JINJA_FILTERS = ["|length", "|upper", "|join(', ')", "|default('')", "|tojson", "|trim"]
MODIFIERS = ["", "", " local", " global", " append", " replace", " local replace", " global append", "  local  "]
BAD_MODIFIERS = [" loud", " local=1", "local"]
INCLUDES = ["part.sd", "part.sd", "bad.sd", "cycle.sd", "binary.sd", "missing.sd", "../outside.sd",
            "/etc/hostname", "", "sub/", "sub"]  # fmt: skip
STRAYS = ["</system>", "</header>", "</user>", "</assistant>", "</together>", "{% endif %}", "{% endfor %}",
          "{% else %}", "{% elif x %}", "]]", "[[", "<system", "<together >", "< system>", "</checkpoint>",
          "<!--", "{#", "{{", "{%", "{% if %}", "<include src=x/>", "<checkpoint"]  # fmt: skip
CHECKPOINTS = ["<checkpoint>", "<checkpoint/>", "<checkpoint>Step 2</checkpoint>", "<obliviate>",
               "<obliviate>Reset</obliviate>", "<checkpoint >", "<checkpoint>\n</checkpoint>"]  # fmt: skip
COMMENTS = ["<!-- a comment [[x]] -->", "{# note {{ x }} #}", "<!--\nmulti\nline\n-->", "{#- trim -#}"]


class Gen:
    """Grammar-aware template generator over a `random.Random`-like source."""

    def __init__(self, rnd: random.Random, error_rate: float = 0.03) -> None:
        self.rnd = rnd
        self.error_rate = error_rate
        self.keys: list[str] = []

    # -- helpers
    def oops(self) -> bool:
        """Whether this piece goes wrong (low draws mean "no": hypothesis favours them)."""
        return self.rnd.randrange(1000) >= 1000 * (1 - self.error_rate)

    def pick(self, items: Sequence[str]) -> str:
        return items[self.rnd.randrange(len(items))]

    def ws(self) -> str:
        return self.pick(WS)

    # -- names
    def ident(self) -> str:
        if self.oops():
            return self.pick(BAD_IDENTS)
        if self.rnd.random() < 0.8:
            name = self.pick(IDENTS) + (str(self.rnd.randrange(100)) if self.rnd.random() < 0.6 else "")
        else:
            first = self.pick("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
            name = first + "".join(self.pick("abcxyz0123456789_") for _ in range(self.rnd.randrange(8)))
        if name in TYPE_NAMES:
            name += "_"
        return name

    def key(self) -> str:
        name = self.ident()
        if self.oops() and self.keys:
            return self.pick(self.keys)  # a duplicate key
        self.keys.append(name)
        return name

    def quantifier(self) -> str:
        if self.oops():
            return self.pick(["{3,1}", "{,2}", "{x}", "{" + "1" * 5000 + "}", "**", "{0}", "{2}{3}"])
        n = str(self.rnd.randrange(1, 6))
        m = str(self.rnd.randrange(int(n), 9))
        return self.pick(["*", "+", "?", f"{{{n}}}", f"{{{n},}}", f"{{{n},{m}}}", f"{{ {n} , {m} }}"])

    # -- Jinja
    def expression(self) -> str:
        out = self.pick(JINJA_ATOMS)
        for _ in range(self.rnd.randrange(3)):
            if self.rnd.random() < 0.5:
                out += self.pick(JINJA_OPS) + self.pick(JINJA_ATOMS)
            else:
                out += self.pick(JINJA_FILTERS)
        if self.rnd.random() < 0.2:
            out = self.pick(["not ", "(", "-"]) + out + (")" if out.startswith("(") else "")
        if self.oops():
            out = self.pick([out + " +", "(" + out, out + ")", out + "|", "", out + " %}", "(" * 300 + out + ")" * 300])
        return out

    def jinja(self) -> str:
        roll = self.rnd.random()
        if roll < 0.6:
            return "{{ " + self.expression() + " }}"
        if roll < 0.75:
            return "{% set v" + str(self.rnd.randrange(9)) + " = " + self.expression() + " %}"
        if roll < 0.85:
            return "{% for i in " + self.expression() + " %}{{ i }}{% endfor %}"
        return self.pick(["{%- set z = 1 -%}", "{% raw %}{{ not rendered }}{% endraw %}", "{{ '}}' }}",
                          "{% include 'x.sd' %}", "{% macro m() %}m{% endmacro %}{{ m() }}", "{{ x }}{{ y }}"])

    # -- text
    def text(self) -> str:
        parts = []
        for _ in range(1 + self.rnd.randrange(4)):
            roll = self.rnd.random()
            if roll < 0.45:
                parts.append(self.pick(PROSE))
            elif roll < 0.65:
                parts.append(self.jinja())
            elif roll < 0.8:
                parts.append(self.pick(["\n", "\n\n", " ", "\r\n", "\t"]))
            elif roll < 0.92:
                parts.append("".join(self.pick(ODD_CHARS) for _ in range(self.rnd.randrange(1, 4))).replace("[[", "[ ["))
            else:
                parts.append(self.pick(COMMENTS))
        text = " ".join(parts)
        if self.oops():
            text += self.pick(STRAYS)
        return text

    # -- slots
    def option_value(self, key: str | None) -> str:
        if self.oops():
            return self.pick(BAD_VALUES)
        if self.rnd.random() < 0.1:
            return "{{ " + self.expression() + " }}"
        if key is None:
            return self.pick(CHOICES)
        return self.pick(GOOD_VALUES.get(key, ["x"]))

    def options(self, type_name: str) -> str:
        items = []
        if type_name in ("pick", "score"):
            items += [self.option_value(None) for _ in range(1 + self.rnd.randrange(4))]
        elif self.oops():
            items.append(self.pick(CHOICES))
        allowed = {
            "int": ["min", "max"], "number": ["min", "max"], "date": ["min", "max"], "respond": ["min_length", "max_length", "pattern"],
            "extract": ["min_length", "max_length", "pattern"], "halt": ["when"],
        }.get(type_name, [])  # fmt: skip
        keys = ["temperature", "max_tokens", "seed", "model", "thinking", "required", "use_tools", "max_iter", "max_calls"]
        for _ in range(self.rnd.randrange(3)):
            if self.oops():
                key = self.pick([*OPTION_KEYS, "colour", "temprature", "format"])
            else:
                key = self.pick(allowed + keys if allowed and self.rnd.random() < 0.5 else keys)
            if key in (k.split("=")[0] for k in items):
                continue
            items.append(f"{key}{self.ws() if self.oops() else ''}={self.option_value(key)}")
        if not items:
            items.append("temperature=0")
        return self.pick([", ", ",", " , ", ",\n"]).join(items)

    def slot(self) -> str:
        roll = self.rnd.random()
        options = ""
        if roll < 0.1:
            action = self.pick(ACTIONS) if not self.oops() else "nothing"
            head = "@" + action
            if action == "set":
                head += ":" + self.key()
                options = self.pick(["v", '"a, b"', "{{ x }}", "value=1"])
            elif action == "timestamp":
                head += ":" + self.key() if self.rnd.random() < 0.7 else ""
                options = self.pick(["", 'format="%Y"'])
            else:
                head += ":" + self.key()
                options = 'url="https://example.com"'
        elif roll < 0.2:
            head = "halt:" + self.key()
            options = self.pick(["", "", "when=false", "when=true"])
        else:
            type_name = self.pick(TYPE_NAMES[:-1]) if not self.oops() else self.pick(["colour", "numbr", "Int"])
            quant = self.quantifier() if self.rnd.random() < 0.2 else ""
            bang = "!" if self.rnd.random() < 0.1 else ""
            if roll < 0.45 and type_name not in ("pick", "score"):
                head = f"{bang}{self.key()}{quant}"
            else:
                head = f"{bang}{type_name}{quant}{self.ws()}:{self.ws()}{self.key()}"
            if type_name in ("pick", "score") or self.rnd.random() < 0.4:
                options = self.options(type_name)
        body = head + (self.ws() + "|" + self.ws() + options if options else "")
        if self.oops():
            body = self.pick([body + " extra", body + "|", "|" + body, body.replace(":", "::", 1), body + ":"])
        closer = self.pick(["]", "", "]]]"]) if self.oops() else "]]"
        return "[[" + self.ws() + body + self.ws() + closer

    # -- structure
    def items(self, depth: int, inside: str = "") -> str:
        out = []
        for _ in range(self.rnd.randrange(1, 6)):
            roll = self.rnd.random()
            if inside in ("system", "header", "user", "assistant") and not self.oops():
                roll = 0.0  # text only
            if inside == "together" and roll >= 0.8 and not self.oops():
                roll = 0.5
            if roll < 0.4:
                out.append(self.text())
            elif roll < 0.75:
                out.append(self.slot())
            elif roll < 0.8:
                out.append(self.pick(CHECKPOINTS) if inside == "" or self.oops() else self.text())
            elif roll < 0.83:
                out.append(f'<include src="{self.pick(INCLUDES)}"/>')
            elif depth > 0:
                out.append(self.block(depth - 1))
            else:
                out.append(self.text())
        return "".join(out)

    def block(self, depth: int) -> str:
        kind = self.pick(["system", "header", "user", "assistant", "together", "if", "if", "for"])
        if kind in ("system", "header"):
            modifiers = self.pick(MODIFIERS) if not self.oops() else self.pick(BAD_MODIFIERS)
            return f"<{kind}{modifiers}>{self.items(depth, kind)}</{kind}{self.maybe_bad_close()}>"
        if kind in ("user", "assistant", "together"):
            return f"<{kind}>{self.items(depth, kind)}</{kind}{self.maybe_bad_close()}>"
        if kind == "for":
            body = self.text() if not self.oops() else self.slot()
            return "{% for i in " + self.expression() + " %}" + body + self.pick(["{% endfor %}", "{%- endfor -%}"])
        trim = self.pick(["", "", "-"])
        text = "{%" + trim + " if " + self.expression() + " " + trim + "%}" + self.items(depth)
        for _ in range(self.rnd.randrange(3)):
            if self.rnd.random() < 0.6:
                text += "{% elif " + self.expression() + " %}" + self.items(depth)
        if self.rnd.random() < 0.5:
            text += "{% else %}" + self.items(depth)
        return text + (self.pick(["", "{% endfor %}", "</together>"]) if self.oops() else "{% endif %}")

    def maybe_bad_close(self) -> str:
        return self.pick([" x", "", ">"]) if self.oops() else ""

    def template(self) -> str:
        return self.items(2)


def generate(rnd: random.Random) -> str:
    return Gen(rnd).template()


def templates() -> st.SearchStrategy[str]:
    return st.randoms(use_true_random=True).map(generate)


# -- mutation of realistic templates -----------------------------------------------

BUILTIN_SEEDS = [
    "Hello {{ name }}! [[greeting]]",
    "<system>You are terse.</system>\nQ1 [[a]]\nThen use {{ a }} [[b]]",
    "[[pick:colour|red, green, \"blue, dark\", 'a|b']] [[int:n|min=0, max={{ top }}]]",
    "<header global>Context: {{ doc }}</header><system local replace>Sys</system>[[!date:when]]",
    "Judge {{ msg }} [[halt:bad|when=false]]\nReply [[reply|use_tools=true, max_iter=3, max_calls=2]]",
    "<together>A [[x]] B [[y{2,4}]]</together> then {{ x }} [[z*]]",
    "{% if x %}[[a]]{% elif y %}[[b]]{% else %}[[c]]{% endif %}\n{% for i in xs %}{{ i }}{% endfor %}",
    "Step [[s1]]<checkpoint>Two</checkpoint>{{ s1 }} [[s2]]<obliviate>[[s3|temperature=0.2, seed=3]]",
    "<user>Example q</user><assistant>Example a</assistant>Now [[answer|max_tokens=20, thinking=low]]",
    "[[@set:k|value=\"v, w\"]] [[@timestamp:now|format=\"%Y\"]] {{ k }} [[code|pattern=\"^[A-Z]+$\"]]",
    "<!-- hidden [[no]] --> {# also hidden #} [[score:s|bad, ok, good]] [[json:j]] [[record:r]]",
    "[[think:t]] [[speak:sp]] [[extract+:e]] [[bool:ok|required=true]] [[number?:n]] [[duration:d]]",
    "[[time:t|min=\"09:00\", max=\"17:00\"]] [[datetime:dt]] [[respond:r|min_length=2, max_length=5]]",
    '<include src="part.sd"/>\nAfter [[after]]',
]


def seed_templates() -> list[str]:
    from_examples = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.sd"))]
    return [*from_examples, *BUILTIN_SEEDS]


TOKENS = [
    "[[", "]]", "|", ":", ",", "=", "!", "@", "*", "+", "?", "{2}", "{1,}", "{3,1}", "{{", "}}", "{%", "%}",
    "{#", "#}", "<!--", "-->", '"', "'", "\\", "<system>", "</system>", "<system local>", "<header>",
    "</header>", "<user>", "</user>", "<assistant>", "</assistant>", "<together>", "</together>",
    "<checkpoint>", "</checkpoint>", "{% if x %}", "{% elif y %}", "{% else %}", "{% endif %}",
    "{% for i in xs %}", "{% endfor %}", "[[a]]", "[[halt:g]]", "[[@set:k|v]]", '<include src="part.sd"/>',
    "\n", "\r\n", "\r", "\x00", "\u2028", "\ud800", "😀",
]  # fmt: skip

SEEDS = seed_templates()


def mutate(rnd: random.Random, text: str, rounds: int) -> str:
    """Random insertions, deletions, swaps and duplications of characters and tokens."""
    for _ in range(rounds):
        i = rnd.randrange(len(text) + 1)
        op = rnd.randrange(7)
        if op == 0:
            text = text[:i] + rnd.choice(ODD_CHARS) + text[i:]
        elif op == 1:
            text = text[:i] + rnd.choice(TOKENS) + text[i:]
        elif op == 2:
            text = text[:i] + text[i + rnd.randrange(1, 16) :]
        elif op == 3 and text:
            i, j = min(i, len(text) - 1), rnd.randrange(len(text))
            chars = list(text)
            chars[i], chars[j] = chars[j], chars[i]
            text = "".join(chars)
        elif op == 4:
            text = text[:i] + text[i : i + rnd.randrange(1, 60)] + text[i:]
        elif op == 5 and text:
            i = min(i, len(text) - 1)
            text = text[:i] + rnd.choice(ODD_CHARS) + text[i + 1 :]
        elif op == 6:  # swap two tokens of the template
            spots = [k for k in range(len(text)) if text.startswith(("[[", "]]", "{%", "%}", "{{", "}}", "<", "|", ","), k)]
            if len(spots) >= 2:
                a, b = sorted(rnd.sample(spots, 2))
                la, lb = (2 if text[a] in "[]{%}" else 1), (2 if text[b] in "[]{%}" else 1)
                if a + la <= b:
                    text = text[:a] + text[b : b + lb] + text[a + la : b] + text[a : a + la] + text[b + lb :]
    return text


def mutant(rnd: random.Random) -> str:
    return mutate(rnd, rnd.choice(SEEDS), rnd.randrange(1, 7))


def mutants() -> st.SearchStrategy[str]:
    return st.randoms(use_true_random=True).map(mutant)


# -- include fixtures --------------------------------------------------------------


def make_include_root(root: Path) -> Path:
    """A folder with includable files, good and bad; returns the main template path."""
    (root / "sub").mkdir(exist_ok=True)
    (root / "part.sd").write_text("Part {{ x }} [[part_answer]]\n", encoding="utf-8")
    (root / "bad.sd").write_text("fine\n  [[nope:x]]\n", encoding="utf-8")
    (root / "cycle.sd").write_text('<include src="cycle.sd"/>', encoding="utf-8")
    (root / "binary.sd").write_bytes(b"\xff\xfe\x00[[a]]")
    (root.parent / "outside.sd").write_text("outside", encoding="utf-8")
    return root / "main.sd"


# -- tests -----------------------------------------------------------------------

FUZZ = settings(
    derandomize=True,  # CI replays the same cases; `python -m bench.fuzz` explores new ones
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


def _mkroot(factory: pytest.TempPathFactory) -> Path:
    root = factory.mktemp("fuzz") / "root"
    root.mkdir()
    return root


@pytest.fixture(scope="module")
def main_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_include_root(_mkroot(tmp_path_factory))


@settings(FUZZ, max_examples=cases(800))
@given(text=templates())
def test_generated_templates_parse_or_fail_with_a_position(text: str, main_template: Path) -> None:
    check_template(text, template_path=main_template)


@settings(FUZZ, max_examples=cases(800))
@given(text=mutants())
def test_mutated_templates_parse_or_fail_with_a_position(text: str, main_template: Path) -> None:
    check_template(text, template_path=main_template)


@settings(FUZZ, max_examples=cases(150))
@given(text=st.one_of(templates(), mutants()))
def test_errors_inside_an_included_file_point_into_that_file(text: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = _mkroot(tmp_path_factory)
    main = make_include_root(root)
    (root / "fuzzed.sd").write_bytes(text.encode("utf-8", "surrogatepass"))  # may be invalid UTF-8
    check_template('Intro [[intro]]\n<include src="fuzzed.sd"/>\nOutro', template_path=main)


def test_the_oracle_catches_a_bad_position() -> None:
    """The fuzz oracle itself can fail: a position past the end is reported."""
    error = sd.TemplateSyntaxError("x", line=3, column=1)
    with pytest.raises(FuzzFailure, match="line out of range"):
        check_position(error, "one line", None)
    error = sd.TemplateSyntaxError("x", line=1, column=10, source_line="one line")
    with pytest.raises(FuzzFailure, match="column out of range"):
        check_position(error, "one line", None)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[[a|seed=" + "1" * 5000 + "]]", "too long"),  # int() digit limit
        ("[[a{" + "1" * 5000 + "}]]", "too long"),
        ("[[a|pattern='a{99999999999}']]", "repetition"),  # re: OverflowError
        ('<include src="' + "a" * 5000 + '"/>', "not found"),  # ENAMETOOLONG
        ('<include src="binary.sd"/>', "cannot read"),  # UnicodeDecodeError
        ("{{" + "(" * 300 + "x" + ")" * 300 + "}}", "nests too deeply"),  # RecursionError in jinja2
        ("{% for i in x %}" * 25 + "{% endfor %}" * 25, "nests too deeply"),  # Python's block limit
        ("{% if x %}" * 200 + "[[a]]" + "{% endif %}" * 200, "nested more than"),  # builder recursion
        ("[[a|{{ " + "(" * 300 + "x" + ")" * 300 + " }}]]", "nests too deeply"),
        ("<together>{{ a + }} [[a]]</together>", "invalid Jinja"),  # jinja2 error escaped
        ("a\r\r\r{{ a + }}", "invalid Jinja"),  # Jinja counts lone CR as a line break
        ("a\x0bb\u2028c\n[[colour:x]]", "unknown type"),  # str.splitlines() vs Lark lines
        ("<together>{% if x %} [[a]]</together>", "{% if %} is still open"),
        ('<system><include src="part.sd"/></system>', "only text may appear inside <system>"),  # pos in part.sd
        ("A <!--\n\n--> B {{ (a }}", "invalid Jinja"),  # line numbers across a dropped comment
        ("[[pick:c|red, 'a\udfffb']]", "lone surrogate"),  # pydantic's multi-line SchemaError
        ("{{ " + "1" * 5000 + " }}", "invalid Jinja"),  # ValueError from Jinja's lexer
    ],
)
def test_fuzz_findings_are_positioned_syntax_errors(text: str, words: str, main_template: Path) -> None:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template(text, template_path=main_template)
    assert words in str(info.value)
    check_position(info.value, text, main_template)


def test_an_error_in_included_text_points_into_the_included_file(main_template: Path) -> None:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template('<system><include src="part.sd"/></system>', template_path=main_template)
    assert info.value.filename is not None and info.value.filename.endswith("part.sd")
    assert (info.value.line, info.value.column) == (1, 14)
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template("A <!--\n\n--> B\n{{ (a }}")
    assert (info.value.line, info.value.column, info.value.source_line) == (4, 1, "{{ (a }}")


def test_line_and_source_line_count_newlines_only() -> None:
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template("a\x0bb\u2028c\n[[colour:x]]")
    assert (info.value.line, info.value.column, info.value.source_line) == (2, 3, "[[colour:x]]")
    with pytest.raises(sd.TemplateSyntaxError) as info:
        parse_template("ok\r\nnext\r{{ a + }}")
    assert (info.value.line, info.value.column) == (2, 6)
    assert info.value.source_line == "next\r{{ a + }}"
