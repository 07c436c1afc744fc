"""What a command loads besides data: the parsed template, the tools file and the model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..tools.files import describe_tool as describe_tool  # the CLI's names for them
from ..tools.files import load_tools as load_tools
from .errors import CliError
from .io import read_template


def load_program(path: Path, include_paths: Sequence[Path] = ()) -> Any:
    """Read and compile a template; a TemplateSyntaxError propagates (exit code 2). The
    parsed template is kept in the cache folder (syntax/stored.py): parsing it again
    needs no parser."""
    text = read_template(path)
    load_beside(path)
    return command_environment().parse(text, template_path=path, include_paths=include_paths)


_LOADED: set[Path] = set()


def command_environment() -> Any:
    """The Environment the commands run with (the default one), given its template cache:
    parsed templates kept in `<cache folder>/templates` (syntax/stored.py; none with
    STRUCKDOWN_CACHE=0), as Jinja is given its `bytecode_cache=`."""
    from ..environment import default_environment

    environment = default_environment()
    if environment.template_cache is None:
        from ..cache import cache_disabled, default_cache_dir

        if not cache_disabled():
            from ..syntax.stored import TemplateStore

            environment.template_cache = TemplateStore(default_cache_dir() / "templates")
    return environment


def load_beside(template: Path | None) -> None:
    """As 0.x's CLI did: the Python files of an `actions/` folder and the YAML type files
    of a `types/` folder beside the template and in the working directory are loaded
    (each file once per process). An action file registers its actions when imported
    (`@struckdown.Actions.register("name")`, or `struckdown.register_action`); a file
    that fails to load is an input error naming it."""
    from ..tools.files import module_from_source

    folders = [Path.cwd()] + ([template.resolve().parent] if template is not None else [])
    for base in reversed(dict.fromkeys(f.resolve() for f in folders)):  # the template's folder first
        read_dotenv(base / ".env")
    for base in dict.fromkeys(f.resolve() for f in folders):
        for file in sorted((base / "actions").glob("*.py")) if (base / "actions").is_dir() else []:
            if file in _LOADED or file.name.startswith("_"):
                continue
            _LOADED.add(file)
            try:
                module_from_source(str(file), file.read_text(encoding="utf-8"), f"struckdown_actions_{file.stem}")
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # never a traceback: the file and the reason
                raise CliError(f"action file {file} failed to load: {type(exc).__name__}: {exc}") from None
        types = base / "types"
        for file in sorted([*types.glob("*.yaml"), *types.glob("*.yml")]) if types.is_dir() else []:
            if file not in _LOADED:
                _LOADED.add(file)
                load_type_path(file)


def load_type_path(path: Path) -> list[str]:
    """A YAML type file, or every one in a folder (`--type`); a bad file is an input error."""
    from ..environment import default_environment

    try:
        return default_environment().load_type_file(path)
    except (OSError, ValueError, TypeError) as exc:
        raise CliError(f"type file {path}: {exc}") from None


def load_mcp(servers: Sequence[str], config: Path | None) -> list[str] | None:
    """What the CLI passes as `mcp=`: the `--mcp` servers and the `--mcp-config` file,
    checked now (a missing script, program or config is an input error, exit 2)."""
    if not servers and config is None:
        return None
    from ..tools.mcp import resolve_servers

    specs = [*servers, *([str(config)] if config is not None else [])]
    try:
        resolve_servers(specs)
    except (ValueError, TypeError) as exc:
        raise CliError(f"--mcp: {exc}" if config is None or servers else f"--mcp-config: {exc}") from None
    return specs


def read_dotenv(path: Path) -> None:
    """A `.env` file's settings (DEFAULT_LLM, LLM_API_BASE, keys, ...) join the environment,
    as 0.18 read them; a variable already set wins. It needs python-dotenv (the `dotenv`
    extra): without it, a `.env` that is there is a warning, never silently ignored."""
    if path in _LOADED or not path.is_file():
        return
    _LOADED.add(path)
    try:
        from dotenv import load_dotenv
    except ImportError:
        import warnings

        warnings.warn(f"{path} is not read: pip install 'struckdown[dotenv]' to read .env files", stacklevel=2)
        return
    load_dotenv(path, override=False)
