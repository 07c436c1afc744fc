"""`<include src=…/>`: finding, reading and parsing included files at parse time.

An include may only reach files inside the template's folder or the
`include_paths`, and may not include itself through a cycle. The resolver is
handed the parser's parse-one-file function, so that this module does not
import the parser that imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

from .nodes import Node

#: Bounds on what includes may inline into one template (issue 24 item 7: a few files
#: that include each other ten times each would otherwise multiply without end).
MAX_INCLUDES = 1_000
MAX_INCLUDED_BYTES = 10_000_000

#: Parses one included file's text: (source, filename, resolver) → its nodes.
ParseFile = Callable[[str, str, "IncludeResolver"], tuple[Node, ...]]


class IncludeError(Exception):
    """An include that cannot be inlined; the builder positions it at the <include> tag."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class IncludeResolver:
    """Inlines `<include src=…/>` at parse time, inside the allowed roots, without cycles."""

    def __init__(
        self,
        template_path: str | os.PathLike[str] | None,
        include_paths: Sequence[str | os.PathLike[str]],
        parse: ParseFile,
    ) -> None:
        self.parse = parse
        self._template_path = template_path
        self._include_paths = include_paths
        self.files: list[tuple[str, int]] = []
        self.inlined_bytes = 0  # text inlined so far, counting each inclusion
        # auto-named slots (`[[bool:]]` → `_bool_01`) are numbered across the whole
        # template, includes too: the resolver is the one object every file's parse shares
        self.auto_keys: dict[str, int] = {}

    # Paths are resolved on the first include: most templates have none, and
    # resolving costs a system call per path component.
    @cached_property
    def stack(self) -> list[Path]:
        """The files being inlined, outermost first (the template itself, if it is a file)."""
        return [Path(self._template_path).resolve()] if self._template_path else []

    @cached_property
    def roots(self) -> list[Path]:
        """The allowed folders: the template's own (or the working directory), then include_paths."""
        base = self.stack[0].parent if self.stack else Path.cwd().resolve()
        return [base, *(Path(p).resolve() for p in self._include_paths)]

    def load(self, src: str, including: str | None) -> tuple[Node, ...]:
        return self._parse_file(self.find(src, including))

    def find(self, src: str, including: str | None) -> Path:
        """The file `<include src=…/>` names, seen from the file `including` (None: the
        template): inside the allowed roots, and not one of the files being inlined."""
        here = Path(including).resolve().parent if including else self.roots[0]
        candidates = [here / src, *(root / src for root in self.roots)]
        for candidate in candidates:
            try:
                found = candidate.is_file()
            except OSError:  # e.g. a name too long for the file system
                found = False
            if found:
                path = candidate.resolve()
                if not any(path.is_relative_to(root) for root in self.roots):
                    raise IncludeError(
                        f"include {src!r} is outside the allowed folders",
                        "includes must stay inside the template's folder or include_paths",
                    )
                if path in self.stack:
                    chain = " -> ".join(p.name for p in [*self.stack, path])
                    raise IncludeError(f"include cycle: {chain}")
                return path
        raise IncludeError(
            f"included file {src!r} not found",
            f"looked in {', '.join(str(c.parent) for c in candidates)}",
        )

    def read(self, path: Path) -> str:
        """The text of an included file, counted against the include caps."""
        if len(self.files) >= MAX_INCLUDES:
            raise IncludeError(
                f"more than {MAX_INCLUDES:,} includes in one template",
                "files that include each other many times multiply; include each part once",
            )
        try:
            stamp, text = path.stat().st_mtime_ns, path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise IncludeError(f"cannot read included file {path.name!r}: {exc}") from None
        self.inlined_bytes += len(text)
        if self.inlined_bytes > MAX_INCLUDED_BYTES:
            raise IncludeError(
                f"includes inline more than {MAX_INCLUDED_BYTES // 1_000_000} MB of text",
                "files that include each other many times multiply; include each part once",
            )
        self.files.append((str(path), stamp))
        return text

    @contextmanager
    def inside(self, path: Path) -> Iterator[None]:
        """While `path`'s own includes are inlined (so a cycle back to it is caught)."""
        self.stack.append(path)
        try:
            yield
        finally:
            self.stack.pop()

    def _parse_file(self, path: Path) -> tuple[Node, ...]:
        text = self.read(path)
        with self.inside(path):
            return self.parse(text, str(path), self)
