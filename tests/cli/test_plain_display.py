"""`sd run`'s display writing to no terminal needs no rich (SPEC §28): `run_console` gives
a `PlainConsole` exactly where rich would see no terminal, and the display's lines
(`Line`) print as rich's `Text` built by the same calls would."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from struckdown.cli.display import Line, PlainConsole, as_rich, make_console, run_console


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class Closed(io.StringIO):
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


@pytest.fixture(autouse=True)
def no_terminal_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("stream", "env", "plain"),
    [
        (io.StringIO(), {}, True),
        (Closed(), {}, True),
        (Tty(), {}, False),
        (io.StringIO(), {"FORCE_COLOR": "1"}, False),
        (io.StringIO(), {"FORCE_COLOR": ""}, False),  # rich reads it (no terminal then): left to rich
        (io.StringIO(), {"TTY_COMPATIBLE": "1"}, False),
        (io.StringIO(), {"TTY_COMPATIBLE": "0"}, False),
    ],
)
def test_the_plain_console_is_chosen_only_where_rich_sees_no_terminal(
    stream: Any, env: dict[str, str], plain: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    console = run_console(stream)
    assert isinstance(console, PlainConsole) is plain
    assert isinstance(console, Console) is not plain
    if plain:
        assert make_console(stream).is_terminal is False  # what rich would have said
        assert console.is_terminal is False and console.file is stream


def built(kind: type[Any]) -> list[Any]:
    """The same calls the display makes, on `Line` or on rich's `Text`."""
    tool = kind("[a] tool lookup(city=\"Paris\") → ", style="yellow")
    tool.append("sunny")
    tool.append(" (12 ms)", style="dim")
    verdict = kind("guard g: ")
    verdict.append("TRIPPED", style="bold red")
    verdict.append(" — off topic")
    return [tool, verdict, kind("done · 1 answer · " + "x" * 120, style="dim"), kind("")]


def rendered(renderables: list[Any], **options: Any) -> str:
    out = io.StringIO()
    console = Console(file=out, highlight=False, soft_wrap=False, width=80, **options)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def test_a_line_renders_as_rich_text_built_the_same_way() -> None:
    lines, texts = built(Line), built(Text)
    assert [line.plain for line in lines] == [text.plain for text in texts]
    assert [as_rich(line) for line in lines] == texts
    coloured = rendered([as_rich(line) for line in lines], force_terminal=True, color_system="truecolor")
    assert coloured == rendered(texts, force_terminal=True, color_system="truecolor")
    assert "\x1b[1;31mTRIPPED" in coloured


def test_the_plain_console_prints_what_rich_prints() -> None:
    """A failed run's last line goes through `print` (rich wraps it at the width)."""
    out = io.StringIO()
    plain = PlainConsole(out)
    for line in built(Line):
        plain.print(line)
    expected = io.StringIO()
    for text in built(Text):
        make_console(expected).print(text)
    assert out.getvalue() == expected.getvalue()
    assert "\x1b[" not in out.getvalue()
