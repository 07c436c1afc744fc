"""Parsed templates kept on disk by the commands (struckdown/syntax/stored.py, SPEC §28):
read back exactly, used only while what the parse depends on is unchanged, and never an
error when the file is bad."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from struckdown.syntax import parse_template, parser, stored
from struckdown.syntax.nodes import Pos, Slot, Template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(
    p for p in [*ROOT.glob("examples/*.sd"), *ROOT.glob("tests/**/*.sd")] if "includes" not in p.parts
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "templates"


def kept(directory: Path) -> sd.Environment:
    """An Environment that keeps parsed templates in `directory` (injected, as Jinja's bytecode_cache=)."""
    return sd.Environment(template_cache=stored.TemplateStore(directory))


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sources lark parsed (a stored template is not parsed)."""
    seen: list[str] = []
    original = parser._parse_nodes

    def counted(source: str, *args: Any) -> Any:
        seen.append(source)
        return original(source, *args)

    monkeypatch.setattr(parser, "_parse_nodes", counted)
    return seen


def test_the_corpus_is_there() -> None:
    assert len(TEMPLATES) >= 15


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_every_template_reads_back_exactly(path: Path) -> None:
    template = parse_template(path.read_text(encoding="utf-8"), template_path=str(path))
    data = stored.encode(template)
    back = stored.decode(json.loads(json.dumps(data)))
    assert back == template
    assert stored.encode(back) == data  # the fields equality skips too (Text.pieces, Option.value_pos)


def test_a_template_parsed_once_is_read_from_disk_after(store: Path, parses: list[str], tmp_path: Path) -> None:
    path = tmp_path / "t.sd"
    source = "Say hi to {{ name }}.\n\n[[pick:colour|red,green]] [[int:n|min=1]]\n"
    first = kept(store).parse(source, template_path=str(path))
    assert parses == [source] and len(list(store.glob("*.json"))) == 1
    second = kept(store).parse(source, template_path=str(path))
    assert parses == [source]  # not parsed again
    assert second.template == first.template and second.keys == ("colour", "n")
    assert stored.encode(second.template) == stored.encode(first.template)
    kept(store).parse(source + "[[more]]\n", template_path=str(path))
    kept(store).parse(source, template_path=str(tmp_path / "other.sd"))  # positions name the file
    assert len(parses) == 3 and len(list(store.glob("*.json"))) == 3


def test_a_template_with_includes_is_not_stored(store: Path, parses: list[str], tmp_path: Path) -> None:
    """Which file an include finds depends on the folders: no key tells, so it is parsed each time."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "part.sd").write_text("Be brief. [[a]]\n")
    main = tmp_path / "main.sd"
    source = '<include src="part.sd"/>\n[[b]]\n'
    assert kept(store).parse(source, template_path=str(main), include_paths=[str(tmp_path / "lib")]).keys == ("a", "b")
    (tmp_path / "part.sd").write_text("Be brief. [[c]]\n")  # beside the template: found first now
    assert kept(store).parse(source, template_path=str(main), include_paths=[str(tmp_path / "lib")]).keys == ("c", "b")
    assert len(parses) == 4 and not store.exists()


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[1, 2]", b'{"@": "Template"}', b'{"@": "Popen", "args": "true"}', b'{"@": "Template", "x": 1}',
     b'{"()": "no list"}'],
)
def test_a_bad_file_is_a_miss_and_is_replaced(store: Path, parses: list[str], tmp_path: Path, content: bytes) -> None:
    source = "A [[a]]\n"
    kept(store).parse(source, template_path="t.sd")
    (file,) = store.glob("*.json")
    good = file.read_bytes()
    file.write_bytes(content)
    assert kept(store).parse(source, template_path="t.sd").keys == ("a",)
    assert len(parses) == 2 and file.read_bytes() == good


def test_only_values_of_a_parsed_template_are_stored() -> None:
    assert stored.decode(stored.encode(Slot("a", "int", None, False, (), Pos(1, 1)))) == Slot(
        "a", "int", None, False, (), Pos(1, 1)
    )
    for value in ([1], {"a": 1}, object(), Path("x"), type("S", (str,), {})("x")):
        with pytest.raises(stored._Unstorable):
            stored.encode(value)
    with pytest.raises(ValueError, match="not a stored template value"):
        stored.decode([1])


def test_a_failed_parse_is_not_stored(store: Path, tmp_path: Path) -> None:
    for _ in range(2):
        with pytest.raises(sd.TemplateSyntaxError) as error:
            kept(store).parse("A [[a\n", template_path="t.sd")
        assert str(error.value).startswith("t.sd:1:6: unexpected line break in slot")
    assert not store.exists() or list(store.glob("*.json")) == []


def test_the_least_recently_used_entries_go(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored, "MAX_ENTRIES", 3)
    for n in range(3):
        kept(store).parse(f"A{n} [[a]]\n", template_path="t.sd")
    files = {n: next(f for f in store.glob("*.json") if f"A{n} " in f.read_text()) for n in range(3)}
    for n, file in files.items():
        os.utime(file, ns=(n + 1, n + 1))
    kept(store).parse("A0 [[a]]\n", template_path="t.sd")  # used: the newest now
    kept(store).parse("A3 [[a]]\n", template_path="t.sd")
    left = sorted(f.read_text().split("A", 2)[1][:1] for f in store.glob("*.json"))
    assert left == ["0", "2", "3"]


def test_an_unwritable_store_parses_as_before(tmp_path: Path, parses: list[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    unwritable = blocker / "templates"  # a folder inside a file: every write fails
    assert kept(unwritable).parse("A [[a]]\n").keys == ("a",)
    assert kept(unwritable).parse("A [[a]]\n").keys == ("a",)
    assert len(parses) == 2


def test_the_library_keeps_nothing_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRUCKDOWN_CACHE_DIR", str(tmp_path))
    assert sd.Environment().template_cache is None and sd.default_environment().template_cache is None
    assert isinstance(sd.Environment().parse("A [[a]]\n").template, Template)
    assert list(tmp_path.iterdir()) == []
