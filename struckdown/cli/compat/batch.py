"""`sd batch` as 0.18 ran it (issue 32): its flags read into today's `BatchRequest`.

* `sd batch TEMPLATE INPUT…` (today's form) still works. With `-p FILE` every
  positional argument is an input; otherwise the first is the template: a file, or an
  inline prompt holding a slot (`sd batch "Summarise: [[s]]" -i 'docs/*.txt'`);
  an inline prompt that reads no variable reads `{{ input }}` first, as 0.18 did.
* `-i PATTERN` (repeatable): a recursive glob (`'data/**/*.txt'`), a file, `-` (stdin)
  or an `http(s)://` URL (fetched once; JSON, JSONL and CSV by content type or suffix,
  anything else one text row). With no input at all, stdin is read when it is not a
  terminal. stdin holds JSONL, one JSON value, or plain text (one row).
* `-o` may be given several times: one run, each file in its own format. The run
  writes the first JSON or JSONL one (types survive; its journal is the run's) and
  the others are written from it; a second `-o` never replaces the first.
* `-k/--keep-inputs` is accepted (input columns are always kept); `-q/--quiet` hides
  the progress and the summary (errors still show).
"""

from __future__ import annotations

import contextlib
import glob
import io
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import CliError

_JSONISH = (".jsonl", ".ndjson", ".json")


def template_and_inputs(
    args: Sequence[str], prompt_file: Path | None, patterns: Sequence[str], stdin_is_tty: bool
) -> tuple[Path | None, str | None, list[str]]:
    """(template file or None, inline template text or None, input specs) from the
    positional arguments, `-p` and `-i`."""
    rest = list(args)
    text: str | None = None
    path: Path | None = prompt_file
    if path is None:
        if not rest:
            raise CliError("no template: sd batch TEMPLATE INPUT…, sd batch -p FILE -i INPUT, "
                           "or sd batch \"inline prompt [[x]]\" -i INPUT")
        first = rest.pop(0)
        if Path(first).is_file() or "[[" not in first:
            path = Path(first)  # a missing file is reported by name when it is read
        else:
            text = first
    inputs = rest + [spec for pattern in patterns for spec in expand(pattern)]
    if not inputs:
        if stdin_is_tty:
            raise CliError("no inputs: give input files, -i PATTERN, or rows on stdin")
        inputs = ["-"]
    return path, text, inputs


def expand(pattern: str) -> list[str]:
    """One `-i`: a URL or `-` as it is, a file, or a recursive glob (sorted); a glob that
    matches nothing is an error naming it, never an empty batch."""
    if pattern == "-" or pattern.startswith(("http://", "https://")):
        return [pattern]
    if Path(pattern).exists() and not glob.has_magic(pattern):
        return [pattern]
    found = sorted(p for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not found:
        raise CliError(f"-i {pattern}: no file matches")
    return found


def inline_template(text: str, directory: Path) -> Path:
    """An inline prompt as a template file in `directory` (0.18: a prompt that reads no
    variable reads `{{ input }}` first)."""
    from ...environment import default_environment

    program = default_environment().parse(text)
    from ...variables import expected

    if not expected(program):
        text = "{{ input }}\n\n" + text
    path = directory / "prompt.sd"
    path.write_text(text, encoding="utf-8")
    return path


def fetch_inputs(specs: Sequence[str], directory: Path) -> list[str]:
    """URLs fetched into `directory` (once; `STRUCKDOWN_ALLOW_FETCH` is for templates, a
    URL on the command line is the user's own); other specs unchanged."""
    out: list[str] = []
    for number, spec in enumerate(specs, 1):
        out.append(_download(spec, directory, number) if spec.startswith(("http://", "https://")) else spec)
    return out


def _download(url: str, directory: Path, number: int) -> str:
    import urllib.error
    import urllib.request

    from ...actions import FETCH_MAX_BYTES

    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - http(s) checked by the caller
            body = response.read(50 * FETCH_MAX_BYTES)
            kind = (response.headers.get_content_type() or "").lower()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise CliError(f"input {url} could not be fetched: {exc}") from None
    name = url.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or "page"
    suffix = Path(name).suffix.lower()
    if suffix not in (*_JSONISH, ".csv", ".pdf", ".docx"):
        suffix = {"application/json": ".json", "application/x-ndjson": ".jsonl", "text/csv": ".csv",
                  "application/pdf": ".pdf"}.get(kind, ".txt")
    path = directory / f"{number:04d}-{Path(name).stem[:60] or 'page'}{suffix}"
    if suffix == ".txt" and "html" in kind:
        from ...actions import page_to_markdown

        path.write_text(page_to_markdown(body.decode("utf-8", errors="replace")), encoding="utf-8")
    else:
        path.write_bytes(body)
    return str(path)


def primary_output(outputs: Sequence[Path]) -> tuple[Path | None, list[Path]]:
    """(the output the run writes, the ones written from it afterwards); every format is
    checked first. The same file twice is an error."""
    from ...batch.tables import output_format

    for path in outputs:
        output_format(path)
    resolved = [p.resolve() for p in outputs]
    if len(set(resolved)) != len(resolved):
        raise CliError("the same -o file was given twice")
    if not outputs:
        return None, []
    first = next((p for p in outputs if p.suffix.lower() in _JSONISH), outputs[0])
    return first, [p for p in outputs if p is not first]


def write_more(primary: Path, others: Sequence[Path]) -> None:
    """Each further `-o` written from the run's own output, in its own format."""
    from ...batch.tables import columns_of, iter_file, write_table

    if not others or not primary.exists():
        return
    columns = columns_of(iter_file(primary))
    for path in others:
        write_table(path, iter_file(primary), columns)


@contextlib.contextmanager
def quiet(enabled: bool) -> Iterator[None]:
    """`-q`: the progress and the summary (written to stderr) are not shown."""
    if not enabled:
        yield
        return
    with contextlib.redirect_stderr(io.StringIO()):
        yield


@contextlib.contextmanager
def scratch(needed: bool = True) -> Iterator[Path]:
    """A temporary folder for an inline template and fetched inputs; made only when one of
    them needs it, so a killed batch leaves no empty `sd-batch-*` folder behind (SPEC §29)."""
    if not needed:
        yield Path(tempfile.gettempdir()) / "sd-batch-unused"  # never written to
        return
    with tempfile.TemporaryDirectory(prefix="sd-batch-") as name:
        yield Path(name)


def stdin_is_tty() -> bool:
    return sys.stdin is None or sys.stdin.isatty()


def run_0x(request: Any, args: Sequence[str], prompt_file: Path | None, patterns: Sequence[str],
           outputs: Sequence[Path], quiet_flag: bool) -> int:
    """The whole `sd batch` of 0.18's flags: inputs found, outputs chosen, the batch run."""
    from dataclasses import replace

    from ..batch import batch_command

    path, text, inputs = template_and_inputs(args, prompt_file, patterns, stdin_is_tty())
    primary, others = primary_output(outputs)
    fetched = any(str(spec).startswith(("http://", "https://")) for spec in inputs)
    with scratch(text is not None or fetched) as directory:
        template = inline_template(text, directory) if text is not None else path
        assert template is not None
        inputs = fetch_inputs(inputs, directory)
        with quiet(quiet_flag):
            code = batch_command(replace(request, template=template, inputs=inputs, output=primary))
        if primary is not None:
            write_more(primary, others)
    return code
