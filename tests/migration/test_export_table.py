"""docs/migration.md's table of 0.18's public names, row by row, against `import struckdown`;
and its examples (a 0.x action file, 0.x YAML type files) load and run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import struckdown as sd
from scripted import Script
from struckdown.environment import default_environment

DOC = (Path(__file__).resolve().parents[2] / "docs" / "migration.md").read_text(encoding="utf-8")
SECTION = DOC.split("## struckdown 0.18's public names", 1)[1].split("\n## ", 1)[0]
ROWS = re.findall(r"^\| `([\w]+)` \| (kept|alias|replaced|removed) \| (.*) \|$", SECTION, re.M)


def test_the_table_lists_every_row() -> None:
    assert len(ROWS) == SECTION.count("\n| `") and len(ROWS) >= 64
    assert len({name for name, _, _ in ROWS}) == len(ROWS)


@pytest.mark.parametrize(("name", "status", "today"), ROWS, ids=[r[0] for r in ROWS])
def test_each_row_is_true(name: str, status: str, today: str) -> None:
    importable = hasattr(sd, name)
    assert importable == (status in ("kept", "alias")), f"{name} is {status} but importable={importable}"
    for named in re.findall(r"`sd\.(\w+)", today):  # every today's name the row gives exists
        assert hasattr(sd, named), f"{name}: sd.{named} does not exist"
    if status == "alias":
        target = re.search(r"of `(?:sd\.)?([\w.]+)`", today)
        assert target is not None
        module, _, attr = target.group(1).rpartition(".")
        owner = sd if not module else __import__(module, fromlist=[attr])
        assert getattr(sd, name) is getattr(owner, attr)


def _block(language: str, first_line: str) -> str:
    found = re.search(rf"```{language}\n({re.escape(first_line)}\n.*?)```", DOC, re.S)
    assert found is not None, first_line
    return found.group(1)


def test_the_docs_action_example_loads_and_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _block("python", "# actions/greetings.py")
    def code(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]

    assert code(source) == code((Path(__file__).parent / "templates_0x" / "actions" / "greetings.py").read_text())
    try:
        exec(compile(source, "greetings.py", "exec"), {})  # noqa: S102 - the docs' own example
        result = sd.complete('[[@shout:loud|text=name, times="2"]]', {"name": "ann"})
        assert result["loud"] == "ANN!ANN!"
    finally:
        default_environment().actions.unregister("shout")


def test_the_docs_yaml_example_loads(tmp_path: Path) -> None:
    folder = tmp_path / "types"
    folder.mkdir()
    (folder / "product.yaml").write_text(_block("yaml", "# types/product.yaml"), encoding="utf-8")
    (folder / "item.yaml").write_text((Path(__file__).parent / "templates_0x" / "types_0x" / "item.yaml").read_text())
    env = sd.Environment()
    assert env.load_type_file(folder) == ["item", "product"]
    answer = {"sku": "S-1", "title": "Lamp", "price": 3, "colour": "red", "tags": []}
    result = env.complete("Describe [[product:p]]", model=Script(lambda c: answer).model())
    assert result["p"].model_dump() == answer
