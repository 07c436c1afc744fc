"""`sd batch --file-columns` reads only files under the input's folder or `--files-root`
(issue 39 N2). A row is data, possibly someone else's: a cell naming `/etc/shadow`,
`../secret`, `~/.ssh/id_rsa`, a symlink out of the folder or `/proc/self/environ` put
that file's text into the prompt. Each is now that row's error, naming the cell; the
other rows go on. Every path here is in the test's own temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, sd, use_model  # noqa: F401
from cli_models import scripted

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SECRET = "OPENAI_API_KEY=sk-swordfish-7f3a"
TEMPLATE = "Row {{ id }}: {{ doc }} Summarise. [[summary]]\n"


def layout(tmp_path: Path) -> tuple[Path, Path]:
    """tmp/secret.txt (outside), tmp/data/{note.txt, sub/inner.txt, inside-link, out-link, pipe, rows.csv}."""
    (tmp_path / "secret.txt").write_text(SECRET)
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "note.txt").write_text("a harmless note")
    (data / "sub" / "inner.txt").write_text("an inner note")
    (data / "out-link").symlink_to(tmp_path / "secret.txt")
    (data / "dir-link").symlink_to(tmp_path)
    (data / "inside-link").symlink_to(data / "note.txt")
    os.mkfifo(data / "pipe")
    (data / "folder").mkdir()
    cells = [
        "note.txt", "../secret.txt", str(tmp_path / "secret.txt"), "out-link", "dir-link/secret.txt", "pipe",
        "~/secret.txt", "/proc/self/environ", "sub/../../secret.txt", "sub/inner.txt", "inside-link", "folder",
        str(data / "note.txt"),
    ]
    rows = data / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i + 1, "doc": cell}) + "\n" for i, cell in enumerate(cells)))
    return data, rows


def expected_errors(tmp_path: Path) -> dict[int, str]:
    data = tmp_path / "data"
    where = "TemplateRuntimeError: rendering failed: MediaError: --file-columns doc: "
    outside = f"is outside the files folder {data} (see --files-root)"
    return {
        2: f"{where}'../secret.txt' {outside}",
        3: f"{where}'{tmp_path / 'secret.txt'}' {outside}",
        4: f"{where}'out-link' leads outside the files folder {data} through a symlink",
        5: f"{where}'dir-link/secret.txt' leads outside the files folder {data} through a symlink",
        6: f"{where}'pipe' is not a regular file",
        7: f"{where}'~/secret.txt': ~ is not expanded in a file column (paths are relative to {data})",
        8: f"{where}'/proc/self/environ' {outside}",
        9: f"{where}'sub/../../secret.txt' {outside}",
        12: f"{where}'folder' is not a regular file",
    }


def test_file_columns_read_only_regular_files_under_the_inputs_folder(tmp_path: Path, use_model: Any) -> None:
    data, rows = layout(tmp_path)
    template = data / "t.sd"
    template.write_text(TEMPLATE)
    use_model(scripted(lambda prompt, info: f"echo: {prompt.strip()}"))
    out = tmp_path / "out.jsonl"
    result = sd("batch", template, rows, "--file-columns", "doc", "-o", out, "-j", "1", "--no-cache")
    assert result.exit_code == 1, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    errors = expected_errors(tmp_path)
    assert {r["id"]: r["_error"] for r in lines if r.get("_error")} == errors
    assert {r["id"]: r["summary"] for r in lines if not r.get("_error")} == {
        1: "echo: Row 1: a harmless note Summarise.",
        10: "echo: Row 10: an inner note Summarise.",
        11: "echo: Row 11: a harmless note Summarise.",
        13: "echo: Row 13: a harmless note Summarise.",
    }
    assert "swordfish" not in out.read_text() + result.output


def test_files_root_widens_or_narrows_the_folder(tmp_path: Path, use_model: Any) -> None:
    data, _ = layout(tmp_path)
    rows = data / "three.jsonl"
    rows.write_text("".join(json.dumps({"id": i, "doc": doc}) + "\n"
                            for i, doc in enumerate(["secret.txt", "data/note.txt", "../note.txt"], 1)))
    template = data / "t.sd"
    template.write_text(TEMPLATE)
    use_model(scripted(lambda prompt, info: f"echo: {prompt.strip()}"))
    wide = sd("batch", template, rows, "--file-columns", "doc", "--files-root", tmp_path, "--no-cache")
    assert wide.exit_code == 1, wide.output
    first, second, third = (json.loads(line) for line in wide.stdout.splitlines())
    assert first["summary"] == f"echo: Row 1: {SECRET} Summarise."  # the operator's root holds it
    assert second["summary"] == "echo: Row 2: a harmless note Summarise."
    assert third["_error"].endswith(f"--file-columns doc: '../note.txt' is outside the files folder {tmp_path} "
                                    "(see --files-root)")
    narrow = sd("batch", template, rows, "--file-columns", "doc", "--files-root", data / "sub", "--no-cache")
    errors = [json.loads(line)["_error"].split("MediaError: ")[1] for line in narrow.stdout.splitlines()]
    assert errors == [
        f"--file-columns doc: no such file: {data / 'sub' / 'secret.txt'}",
        f"--file-columns doc: no such file: {data / 'sub' / 'data' / 'note.txt'}",
        "--file-columns doc: '../note.txt' is outside the files folder " + str(data / "sub") + " (see --files-root)",
    ]


def test_files_root_must_be_a_folder_and_needs_file_columns(tmp_path: Path, use_model: Any) -> None:
    data, rows = layout(tmp_path)
    template = data / "t.sd"
    template.write_text(TEMPLATE)
    use_model(scripted(lambda prompt, info: "x"))
    missing = sd("batch", template, rows, "--file-columns", "doc", "--files-root", tmp_path / "nope")
    assert missing.exit_code == 2
    assert f"error: --files-root {tmp_path / 'nope'} is not a folder" in missing.stderr
    alone = sd("batch", template, rows, "--files-root", data)
    assert alone.exit_code == 2
    assert "error: --files-root is the folder of --file-columns paths: give --file-columns too" in alone.stderr


@pytest.mark.process  # the attack as a user meets it: sd in a new process
def test_the_attack_end_to_end_in_a_new_process(tmp_path: Path) -> None:
    """`sd batch` as a user runs it, on rows someone else wrote: no secret reaches the model."""
    data, rows = layout(tmp_path)
    template = data / "t.sd"
    template.write_text(TEMPLATE)
    out = tmp_path / "out.jsonl"
    pythonpath = os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "SD_SECRET_PROBE": SECRET, "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "struckdown.cli", "batch", str(template), str(rows), "--file-columns", "doc",
         "--model", "cli_models:echo", "-o", str(out), "-j", "2", "--no-cache"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert {i: r["_error"] for i, r in lines.items() if r.get("_error")} == expected_errors(tmp_path)
    assert sorted(i for i, r in lines.items() if "summary" in r and not r.get("_error")) == [1, 10, 11, 13]
    assert "swordfish" not in out.read_text() + done.stdout + done.stderr


def test_a_folder_swapped_for_a_symlink_after_the_check_is_caught_once_open(
    tmp_path: Path, use_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: the path resolved inside the folder, then a folder on the way became a
    symlink out of it before the file was opened. The opened file's own path decides."""
    data, _ = layout(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inner.txt").write_text(SECRET)
    rows = data / "one.jsonl"
    rows.write_text(json.dumps({"id": 1, "doc": "sub/inner.txt"}) + "\n")
    template = data / "t.sd"
    template.write_text(TEMPLATE)
    use_model(scripted(lambda prompt, info: f"echo: {prompt.strip()}"))
    real_stat = os.stat
    target = str(data / "sub" / "inner.txt")

    def swapping_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        found = real_stat(path, *args, **kwargs)
        if str(path) == target and not (data / "sub").is_symlink():  # checked: now swap the folder
            (data / "sub").rename(data / "sub-was")
            (data / "sub").symlink_to(outside)
        return found

    monkeypatch.setattr(os, "stat", swapping_stat)
    result = sd("batch", template, rows, "--file-columns", "doc", "--no-cache")
    monkeypatch.undo()
    assert (data / "sub").is_symlink()  # the swap happened between the check and the open
    (line,) = result.stdout.splitlines()
    assert json.loads(line)["_error"] == (
        "TemplateRuntimeError: rendering failed: MediaError: --file-columns doc: 'sub/inner.txt' leads outside "
        f"the files folder {data} through a symlink"
    )
    assert "swordfish" not in result.output
