"""`sd cache stats` and `sd cache clear`: the response cache on disk (docs/providers.md)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from .errors import EXIT_OK, CliError
from .io import dumps


def _cache(directory: Path | None) -> Any:
    from ..cache import ResponseCache, flush_all

    flush_all()  # writes this process queued (a host embedding the CLI) land first
    return ResponseCache(directory)


def stats_command(directory: Path | None, as_json: bool) -> int:
    cache = _cache(directory)
    try:
        stats = cache.stats()
    except (sqlite3.Error, OSError) as exc:
        raise CliError(f"cannot read the response cache {cache.path}: {exc}", code=1) from None
    finally:
        cache.close()
    if as_json:
        stats = {k: v for k, v in stats.items() if k not in ("hits", "misses", "errors")}  # this process: always 0
        sys.stdout.write(dumps(stats) + "\n")
        return EXIT_OK
    lines = [
        f"path: {stats['path']}{'' if Path(stats['path']).exists() else ' (not created yet)'}",
        f"entries: {stats['entries']:,}",
        f"size: {_size(stats['bytes'])} of {_size(stats['max_bytes'])} (STRUCKDOWN_CACHE_MAX_MB)",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return EXIT_OK


def clear_command(directory: Path | None) -> int:
    cache = _cache(directory)
    try:
        removed = cache.clear()
    except (sqlite3.Error, OSError) as exc:
        raise CliError(
            f"cannot clear the response cache {cache.path}: {exc} (if it is damaged, delete the file)", code=1
        ) from None
    finally:
        cache.close()
    sys.stdout.write(f"removed {removed:,} entr{'y' if removed == 1 else 'ies'} from {cache.path}\n")
    return EXIT_OK


def _size(count: int) -> str:
    """Binary units, as STRUCKDOWN_CACHE_MAX_MB counts them (500 → 500.0 MiB)."""
    if count < 1024:
        return f"{count} bytes"
    value = count / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
