"""`sd chat`'s flags of 0.18 (issue 32): the ones that still mean something work, the
others are refused with what to write instead (never a bare "no such option").

Working: `-s/--source FILE|URL` (the context gets `source`, `input`, `content`,
`filename`, `basename`, and `url` for a URL; PDF/DOCX text with the `docs` extra),
`-d/--data FILE.json` (into `{{ data }}`) or `-d key=FILE.json` (into `{{ key }}`),
`--attach name=PATH` (an image or file, as `-c name=@PATH`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from ..errors import CliError

#: 0.18's flag → what to write today
REFUSED = {
    "-i/--interactive": "run sd chat once per turn with --history FILE (the turns so far)",
    "--dump": "use -o FILE: the answers, usage and verdicts as JSON",
    "-v/--verbose": "sd chat shows every answer, tool call and verdict as it happens; --otel traces each request",
    "--debug-api": "use --otel: an OpenTelemetry trace of every request",
    "--show-context": "use --json: the answers as JSON on stdout",
}


def refuse(given: Sequence[str]) -> None:
    """A refused 0.18 flag is an input error (exit 2) naming today's spelling."""
    if given:
        flag = given[0]
        raise CliError(f"{flag} is not a flag any more: {REFUSED[flag]}")


def context_pairs(source: str | None, data: Sequence[str], attach: Sequence[str], directory: Path) -> list[str]:
    """`-c key=value` pairs standing for -s, -d and --attach."""
    pairs: list[str] = []
    if source is not None:
        pairs += _source_pairs(source, directory)
    for item in data:
        key, sep, file = item.partition("=")
        name, path = (key.strip(), Path(file)) if sep and key.strip().isidentifier() else ("data", Path(item))
        if not path.is_file():
            raise CliError(f"-d {item}: no such file")
        try:
            value = json.loads(path.read_text(encoding="utf-8-sig"))
        except ValueError as exc:
            raise CliError(f"-d {item}: not JSON: {exc}") from None
        pairs.append(f"{name}={json.dumps(value)}")
    for item in attach:
        name, sep, where = item.partition("=")
        if not sep or not name.strip().isidentifier():
            raise CliError(f"--attach expects name=PATH, got {item!r}")
        pairs.append(f"{name.strip()}=@{where}")
    return pairs


def _source_pairs(source: str, directory: Path) -> list[str]:
    from ...batch.documents import file_row

    if source.startswith(("http://", "https://")):
        from .batch import _download

        row = file_row(Path(_download(source, directory, 1)), source)
        row["url"] = source
        row["filename"] = source.rstrip("/").rsplit("/", 1)[-1] or source
    else:
        path = Path(source)
        if not path.is_file():
            raise CliError(f"-s {source}: no such file (or give an http(s) URL)")
        row = file_row(path)
    return [f"{key}={json.dumps(value)}" for key, value in row.items()]
