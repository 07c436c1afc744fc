"""`sd types T.sd --jsonschema | --typescript`: what a template takes and gives, for the
clients of `sd serve --api` (SPEC §36). The schemas are the library's (`service.py`), the
same the server validates bodies with and publishes in `/openapi.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_OK, CliError, reporting_errors
from .options import IncludeOpt, TemplateArg


def types_command(template: Path, *, typescript: bool, output: Path | None, include_paths: tuple[Path, ...]) -> int:
    from .. import service
    from .io import write_output
    from .loading import load_program

    program = load_program(template, include_paths)
    name = template.stem
    if typescript:
        text = service.typescript(program, name)
    else:
        text = json.dumps(service.schemas(program, name), indent=2, ensure_ascii=False) + "\n"
    write_output(output, text)
    return EXIT_OK


def command(
    template: TemplateArg,
    jsonschema: Annotated[
        bool, typer.Option("--jsonschema", help="Print {input, output} as JSON Schema 2020-12 (the default).")
    ] = False,
    typescript: Annotated[
        bool, typer.Option("--typescript", help="Print TypeScript types: NameInput, NameOutput.")
    ] = False,
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="Write them here (default: stdout).", show_default=False)
    ] = None,
    include_path: IncludeOpt = None,
) -> None:
    """Print the input and output types of a template, as `sd serve --api` serves it."""
    with reporting_errors():
        if jsonschema and typescript:
            raise CliError("--jsonschema and --typescript cannot be used together: pick one")
        code = types_command(template, typescript=typescript, output=output, include_paths=tuple(include_path or ()))
    raise typer.Exit(code)
