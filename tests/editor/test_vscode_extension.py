"""The VS Code extension folder holds together: the language, its configuration, the
generated grammars it contributes, and a client that starts `sd lsp`."""

from __future__ import annotations

import json
from pathlib import Path

from struckdown.editor import textmate

EXTENSION = Path(__file__).resolve().parents[2] / "editors" / "vscode"


def manifest() -> dict:
    return json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))


def test_the_extension_contributes_the_language_and_both_generated_grammars() -> None:
    contributes = manifest()["contributes"]
    (language,) = contributes["languages"]
    assert (language["id"], language["extensions"]) == ("struckdown", [".sd"])
    assert (EXTENSION / language["configuration"]).is_file()
    grammars = {g["scopeName"]: g for g in contributes["grammars"]}
    assert set(grammars) == {textmate.SCOPE, textmate.INJECTION_SCOPE}
    assert grammars[textmate.SCOPE]["language"] == "struckdown"
    assert grammars[textmate.INJECTION_SCOPE]["injectTo"] == ["text.html.markdown"]
    for scope, grammar in grammars.items():
        assert json.loads((EXTENSION / grammar["path"]).read_text(encoding="utf-8"))["scopeName"] == scope


def test_language_configuration_pairs_slot_brackets_and_knows_comments() -> None:
    config = json.loads((EXTENSION / "language-configuration.json").read_text(encoding="utf-8"))
    assert config["comments"] == {"blockComment": ["<!--", "-->"]}
    assert ["[[", "]]"] in config["brackets"]
    assert {"open": "[[", "close": "]]"} in config["autoClosingPairs"]
    assert ["[[", "]]"] in config["surroundingPairs"]


def test_the_client_starts_sd_lsp_on_stdio() -> None:
    properties = manifest()["contributes"]["configuration"]["properties"]
    assert properties["struckdown.server.command"]["default"] == "sd"
    assert properties["struckdown.server.args"]["default"] == ["lsp"]
    source = (EXTENSION / manifest()["main"]).read_text(encoding="utf-8")
    assert 'require("vscode-languageclient/node")' in source
    assert "TransportKind.stdio" in source
    assert "vscode-languageclient" in manifest()["dependencies"]


def test_the_client_passes_the_tools_file_and_the_diagnostics_delay() -> None:
    properties = manifest()["contributes"]["configuration"]["properties"]
    assert properties["struckdown.diagnosticsDelay"]["default"] == 200
    source = (EXTENSION / manifest()["main"]).read_text(encoding="utf-8")
    assert 'diagnosticsDelay: config.get("diagnosticsDelay")' in source
    assert 'toolsFile: config.get("toolsFile") || null' in source
