"""`sd chat`: a template given inline, on stdin or as a file, run and shown like `sd run`.

As in 0.x: `sd chat "Tell me a joke [[joke]]"` (the words are joined with spaces),
`echo 'Hi [[x]]' | sd chat`, `sd chat -p template.sd` (or a single argument that is
a file). A prompt given inline or on stdin that holds no slot gets `[[response]]`
at its end, so it is answered.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .compat.options import TypeFileOpt
from .errors import CliError, reporting_errors
from .options import RUN_COMMAND_FLAGS, run_flags

DEFAULT_SLOT = "[[response]]"


def prompt_source(words: list[str], prompt_file: Path | None, stdin_text: str | None) -> tuple[Path | None, str | None]:
    """(a template file, or None) and (the template text, or None): the file with -p or
    when the one argument is an existing file; else the words; else stdin."""
    if prompt_file is not None:
        if words:
            raise CliError("give the prompt as words or as -p FILE, not both")
        return prompt_file, None
    if len(words) == 1 and Path(words[0]).is_file():
        return Path(words[0]), None
    if words:
        return None, " ".join(words)
    if stdin_text is not None and stdin_text.strip():
        return None, stdin_text
    raise CliError('no prompt: sd chat "Tell me a joke [[joke]]", a template on stdin, or sd chat -p FILE')


def with_a_slot(text: str) -> str:
    """The prompt, answered: `[[response]]` appended when it holds no slot."""
    from ..environment import default_environment
    from .loading import load_beside

    load_beside(None)  # actions/ and types/ of the working directory, as 0.x's CLI loaded them
    program = default_environment().parse(text)
    if program.slots() or any(segment.keys for segment in program.segments):
        return text
    return text.rstrip() + "\n\n" + DEFAULT_SLOT + "\n"


def _stdin() -> str | None:
    if sys.stdin is None or sys.stdin.isatty():
        return None
    return sys.stdin.read()


@run_flags(*RUN_COMMAND_FLAGS, "stop_at")
def command(
    prompt: Annotated[
        Optional[list[str]],
        typer.Argument(help="The prompt (a template: words are joined with spaces), or a template file.", show_default=False),
    ] = None,
    prompt_file: Annotated[
        Optional[Path], typer.Option("--prompt-file", "-p", help="Read the template from this file.", show_default=False)
    ] = None,
    context: Annotated[
        Optional[Path], typer.Option("--context", help="Context variables from a JSON or YAML file.", show_default=False)
    ] = None,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("-c", "--set", metavar="KEY=VALUE", help="Set a context variable (repeatable).", show_default=False),
    ] = None,
    history: Annotated[
        Optional[Path], typer.Option("--history", help="A conversation file for [[@history]].", show_default=False)
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write the answers ({slot: answer}, as 0.x did) to this "
                                     "JSON file (sd run -o writes {answers, usage, halted}).", show_default=False)
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print only the answers as JSON on stdout.")] = False,
    stream: Annotated[bool, typer.Option("--stream/--no-stream", help="Stream tokens as they arrive.")] = True,
    type_files: TypeFileOpt = None,
    source: Annotated[
        Optional[str],
        typer.Option("--source", "-s", metavar="FILE|URL", help="A document or page: its text is {{ input }} "
                     "(also content, source, filename, basename; url for a URL).", show_default=False),
    ] = None,
    data: Annotated[
        Optional[list[str]],
        typer.Option("--data", "-d", metavar="[KEY=]FILE.json", help="JSON into {{ data }} (or {{ KEY }}); repeatable.",
                     show_default=False),
    ] = None,
    attach: Annotated[
        Optional[list[str]],
        typer.Option("--attach", metavar="NAME=PATH", help="An image or file as {{ NAME }} (like -c NAME=@PATH).",
                     show_default=False),
    ] = None,
    interactive: Annotated[bool, typer.Option("--interactive", "-i", hidden=True)] = False,
    dump: Annotated[Optional[Path], typer.Option("--dump", hidden=True)] = None,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, hidden=True)] = 0,
    debug_api: Annotated[bool, typer.Option("--debug-api", hidden=True)] = False,
    show_context: Annotated[bool, typer.Option("--show-context", hidden=True)] = False,
    *,
    flags: dict[str, Any],
) -> None:
    """Chat with a model: an inline prompt ("Tell me a joke [[joke]]"), a template on stdin, or a template file."""
    with reporting_errors(), contextlib.ExitStack() as stack:
        from .compat.chat import context_pairs, refuse
        from .compat.options import load_type_files
        from .run_cmd import RunRequest, run_command

        load_type_files(type_files)
        refuse([flag for flag, given in (
            ("-i/--interactive", interactive),
            ("--dump", dump is not None), ("-v/--verbose", verbose > 0), ("--debug-api", debug_api),
            ("--show-context", show_context),
        ) if given])

        path, text = prompt_source(list(prompt or ()), prompt_file, None if prompt or prompt_file else _stdin())
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="sd-chat-"))
        pairs = context_pairs(source, data or (), attach or (), Path(scratch)) + list(set_ or ())
        if history is not None:
            import json

            pairs.append(f"_history_file={json.dumps(str(history))}")
        code = run_command(
            RunRequest(
                template=path if path is not None else Path("<prompt>"),
                source=None if text is None else with_a_slot(text),
                context_file=context,
                pairs=pairs,
                flags=flags,
                output=output,
                as_json=as_json,
                stream=stream,
                answers_only=True,
            )
        )
    raise typer.Exit(code)
