"""docs/approval.md: its Python blocks run as they are, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "approval.md"


def test_every_python_block_of_the_approval_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the page writes refund.state.json
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 7
    namespace: dict[str, object] = {"__name__": "approval_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    printed = capsys.readouterr().out
    assert "approve= names 'issue_refnd', which is not a tool of this run" in printed
    assert "paused: 1 tool call awaits approval (reply.1: issue_refund)" in printed
    assert "reply.1 False Not today." in printed
    assert (tmp_path / "refund.state.json").exists()
