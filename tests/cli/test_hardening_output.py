"""`-o` writes into what is there and never replaces what is not a regular file.

Symlinks are written through (the link stays, its target gets the output), devices
and FIFOs are written in place, new files get the umask's mode and replaced files
keep theirs.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import plain_environment, runner, sd, use_model  # noqa: F401
from cli_models import scripted


@pytest.fixture(autouse=True)
def echo_model(use_model: Any) -> None:
    use_model(scripted(lambda prompt, info: f"echo: {prompt.strip()}"))


@pytest.fixture
def template(tmp_path: Path) -> Path:
    path = tmp_path / "t.sd"
    path.write_text("Say hi [[greeting]]\n", encoding="utf-8")
    return path


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def device(tmp_path: Path, name: str, minor: int) -> Path:
    """A private copy of /dev/NAME when we may make device nodes (root), else /dev/NAME itself:
    a regression then replaces a node in tmp_path, never the system's (which only root could)."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        os.close(os.open(node, os.O_WRONLY))  # a nodev mount refuses to open it
    except OSError:
        node.unlink(missing_ok=True)
        return Path("/dev") / name
    return node


def rows_file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    return path


def test_run_output_through_a_symlink_keeps_the_link(tmp_path: Path, template: Path) -> None:
    real = tmp_path / "real" / "out.json"
    real.parent.mkdir()
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "out.json"
    link.symlink_to(real)
    result = sd("run", template, "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text(encoding="utf-8"))["answers"] == {"greeting": "echo: Say hi"}


def test_batch_output_through_a_dangling_symlink_creates_its_target(tmp_path: Path, template: Path) -> None:
    real = tmp_path / "elsewhere.csv"
    link = tmp_path / "out.csv"
    link.symlink_to(real)
    result = sd("batch", template, rows_file(tmp_path), "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert real.read_text(encoding="utf-8").splitlines()[0] == "n,greeting"


def test_run_output_into_a_fifo_writes_into_it(tmp_path: Path, template: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader exists, so opening to write does not block
    try:
        result = sd("run", template, "-o", fifo)
        assert result.exit_code == 0, result.output
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
        data = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert json.loads(data)["answers"] == {"greeting": "echo: Say hi"}


def test_run_output_to_the_null_device_leaves_the_device(tmp_path: Path, template: Path) -> None:
    null = device(tmp_path, "null", 3)
    result = sd("run", template, "-o", null)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(null).st_mode)


def test_run_output_to_a_full_device_is_a_clear_error(tmp_path: Path, template: Path) -> None:
    full = device(tmp_path, "full", 7)
    result = sd("run", template, "-o", full)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"error: cannot write {full}: No space left on device"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_new_output_files_get_the_umask_mode(tmp_path: Path, template: Path, umask_027: None) -> None:
    out = tmp_path / "new.json"
    assert sd("run", template, "-o", out).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    table = tmp_path / "new.csv"
    assert sd("batch", template, rows_file(tmp_path), "-o", table).exit_code == 0
    assert stat.S_IMODE(table.stat().st_mode) == 0o640


def test_replaced_output_files_keep_their_mode(tmp_path: Path, template: Path, umask_027: None) -> None:
    out = tmp_path / "out.json"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o664)
    assert sd("run", template, "-o", out).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o664
    assert json.loads(out.read_text(encoding="utf-8"))["answers"] == {"greeting": "echo: Say hi"}


def test_output_that_is_a_directory_names_it_not_a_temporary_file(tmp_path: Path, template: Path) -> None:
    folder = tmp_path / "out.json"
    folder.mkdir()
    result = sd("run", template, "-o", folder)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"error: cannot write {folder}: it is a directory"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["out.json", "t.sd"]
    assert list(folder.iterdir()) == []


# -- the text outputs: sd flat, sd graph, sd preview ---------------------------------


@pytest.mark.parametrize("command", ["flat", "graph", "preview"])
def test_text_output_goes_through_a_symlink_with_the_umask_mode(
    tmp_path: Path, template: Path, umask_027: None, command: str
) -> None:
    from struckdown.cli.app import app

    printed = runner.invoke(app, [command, str(template)])  # not sd(): preview's CSS names Generic.Traceback
    assert printed.exit_code == 0 and printed.exception is None
    real = tmp_path / "real" / "out.txt"
    real.parent.mkdir()
    link = tmp_path / "out.txt"
    link.symlink_to(real)
    result = sd(command, template, "-o", link)
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr == f"wrote {link}\n"
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == printed.stdout
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


@pytest.mark.parametrize("command", ["flat", "graph", "preview"])
def test_text_output_to_a_full_device_is_a_clear_error(tmp_path: Path, template: Path, command: str) -> None:
    full = device(tmp_path, "full", 7)
    result = sd(command, template, "-o", full)
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == f"error: cannot write {full}: No space left on device"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


@pytest.mark.parametrize("command", ["run", "batch"])
def test_a_dangling_output_symlink_into_a_missing_folder_fails_before_any_request(
    tmp_path: Path, template: Path, use_model: Any, command: str
) -> None:
    """Issue 39 N17: the run (every row of a batch) was paid for, then the write failed."""
    prompts: list[str] = []
    use_model(scripted(lambda prompt, info: prompts.append(prompt) or "paid"))
    link = tmp_path / ("out.json" if command == "run" else "out.csv")
    link.symlink_to(tmp_path / "gone" / "out.json")
    args = ["run", template] if command == "run" else ["batch", template, rows_file(tmp_path)]
    result = sd(*args, "-o", link)
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"error: cannot write {link}: it is a symlink to {tmp_path / 'gone' / 'out.json'}, whose folder does not exist"
    )
    assert prompts == []
    assert not (tmp_path / "out.journal.jsonl").exists()
