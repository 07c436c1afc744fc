"""Issue 55 (SPEC §37): 0.x YAML types that did not load — `list[str]` fields, a field
naming another YAML type, and `str()` of an answer naming its class. The files are this
test's own (a small comic-book pair in 0.x's one-type-per-file form)."""

from __future__ import annotations

from pathlib import Path

import pytest

import struckdown as sd
from scripted import Script

POWER = """\
name: power
description: One super power
fields:
  name: {type: str, required: true, description: What the power is called}
  strength: {type: int, ge: 1, le: 10}
"""
HERO = """\
name: hero
description: A comic-book hero
llm_config:
  temperature: 0.3
fields:
  alias: {type: str, required: true}
  catchphrases: {type: "list[str]", description: Things the hero shouts}
  signature: {type: power, description: The best-known power}
  powers: {type: "List[power]"}
  teams: "list[str]"
"""
ANSWER = {
    "alias": "Night Owl",
    "catchphrases": ["Hoo goes there?"],
    "signature": {"name": "night vision", "strength": 9},
    "powers": [{"name": "flight", "strength": 4}],
    "teams": ["Owls"],
}


@pytest.fixture
def types_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "types"
    folder.mkdir()
    (folder / "hero.yaml").write_text(HERO)  # read before power.yaml by name: it waits for it
    (folder / "power.yaml").write_text(POWER)
    return folder


def test_0x_yaml_types_with_lists_and_nested_types_load_and_run(types_folder: Path) -> None:
    env = sd.Environment()
    assert env.load_type_file(types_folder) == ["power", "hero"]
    script = Script(lambda c: ANSWER)
    result = env.complete("Invent a hero for {{ city }}. [[hero:h]]", {"city": "Leeds"}, model=script.model())
    hero = result["h"]
    assert hero.model_dump() == ANSWER
    assert str(hero) == (
        "Hero(alias='Night Owl', catchphrases=['Hoo goes there?'], signature=Power(name='night vision', "
        "strength=9), powers=[Power(name='flight', strength=4)], teams=['Owls'])"
    )
    schema = script.calls[0].schema
    assert schema is not None
    props = schema["$defs"]["Hero"]["properties"]
    assert props["catchphrases"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert props["signature"]["anyOf"][0] == {"$ref": "#/$defs/Power"}
    assert props["powers"]["anyOf"][0] == {"items": {"$ref": "#/$defs/Power"}, "type": "array"}
    assert schema["$defs"]["Power"]["required"] == ["name"]


def test_a_field_naming_a_type_never_loaded_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "hero.yaml").write_text(HERO)
    with pytest.raises(ValueError, match=r"hero\.yaml: type 'hero': field 'signature': unknown field type 'power'"):
        sd.Environment().load_type_file(tmp_path / "hero.yaml")
