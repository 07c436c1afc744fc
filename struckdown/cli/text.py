"""Text from models and tools, made safe to show on a terminal.

An answer, a streamed token, a tool's output or error, or a guard's reason can hold
control characters put there by a prompt injection: ESC sequences that erase lines,
move the cursor, set the window title or write the clipboard (OSC 52). Everything the
CLI shows goes through `visible`, which spells each C0 and C1 control character (but
newline and tab), DEL and each lone surrogate as a backslash escape (`\\x1b`, `\\x9b`,
`\\ud800`), so it is seen and never obeyed.
"""

from __future__ import annotations

from ..codec import json_text as json_text  # the CLI's name for it (JSON safe on a terminal)

_KEPT = ("\n", "\t")

_ESCAPES: dict[int, str] = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
    if chr(code) not in _KEPT
}
_ESCAPES.update({code: f"\\u{code:04x}" for code in range(0xD800, 0xE000)})


def visible(text: str) -> str:
    """`text` with control characters (but newline and tab) and lone surrogates spelled out."""
    return text.translate(_ESCAPES)


def plain_warnings() -> None:
    """Warnings as one `warning: …` line on stderr (no file and line of the code that warned)."""
    import sys
    import warnings

    def show(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        sys.stderr.write(f"warning: {visible(str(message))}\n")

    warnings.showwarning = show


def prepare() -> None:
    """The typer app's callback (`app.main`) for the paths that start without typer: no
    pydantic-ai banner, warnings as `warning:` lines."""
    import os

    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")
    plain_warnings()
