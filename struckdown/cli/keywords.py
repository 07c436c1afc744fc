"""Flags into keywords, in one place (SPEC §22): what `RUN_FLAGS` values give a run.

Every command that runs a template (`sd run`, `sd chat`, `sd batch`, `sd resume`) passes
its `flags=` through `run_keywords`; a flag left at its default gives no keyword, so the
Environment's default (or a paused run's recorded option) stands.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import CliError
from .fast.run_params import OPTION_OF  # RUN_FLAGS' options, generated: no typer (fast/run.py)


def run_keywords(flags: Mapping[str, Any], *, instrument: Any = None, tools: Any = None) -> dict[str, Any]:
    """The `complete…` keywords of the given flags. `instrument`: the tracer provider `--otel`
    made (cli/costs.otel); `tools`: the tools already loaded (a Dask batch ships names instead)."""
    from . import loading

    out: dict[str, Any] = {}
    if "no_cache" in flags:  # the CLI's response cache is on unless --no-cache says otherwise
        out["cache"] = not flags["no_cache"]
    for name, value in flags.items():
        if name == "no_cache" or value is None or value is False or value == [] or value == ():
            continue
        option = OPTION_OF[name]
        if name == "tools":
            out["tools"] = tools if tools is not None else loading.load_tools(value)
        elif name in ("max_tokens", "seed", "thinking"):  # model settings of every request
            out["settings"] = {**out.get("settings", {}), name: _setting(name, value)}
        elif name == "fallback":
            out["fallback"] = list(value)
        elif name == "include_path":
            out["include_paths"] = tuple(value)
        elif name == "no_prompt_cache":
            out["prompt_cache"] = False
        elif name == "otel":
            out["instrument"] = instrument if instrument is not None else True
        elif name == "prices":
            out["prices"] = _prices(value)
        elif name in ("mcp", "mcp_config"):
            continue  # both at once, below
        else:
            out[option] = _checked(name, option, value)
    mcp = loading.load_mcp(flags.get("mcp") or (), flags.get("mcp_config"))
    if mcp is not None:
        out["mcp"] = mcp
    return out


def _checked(name: str, option: str, value: Any) -> Any:
    """A flag's value through its run option's own check (run_options.OPTIONS), as an input
    error naming the flag: the rule is written once, for the CLI and the library alike."""
    from ..run_options import OPTIONS

    check = OPTIONS[option].check
    if check is None:
        return value
    try:
        return check(value)
    except ValueError as exc:
        from .options import RUN_FLAGS

        info = RUN_FLAGS[name].annotation.__metadata__[0]
        spelled = next(d for d in (info.default, *info.param_decls) if isinstance(d, str) and d.startswith("--"))
        raise CliError(f"{spelled}: {exc}") from None


def _setting(name: str, value: Any) -> Any:
    if name != "thinking":
        return value
    from ..slot_options import SLOT_OPTIONS

    try:  # the slot option's own check: the same levels and spellings as thinking= in a template
        return SLOT_OPTIONS["thinking"].check(value)
    except ValueError as exc:
        raise CliError(f"--thinking: {exc}") from None


def _prices(path: Any) -> Any:
    from ..errors import ConfigurationError
    from ..models.pricing import load_prices_file

    try:
        return load_prices_file(path)
    except ConfigurationError as exc:
        raise CliError(f"--prices: {exc}") from None
