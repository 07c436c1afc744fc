"""Approval in the CLI (SPEC §12): who decides a call in `sd run`, writing a pause, `sd resume`.

`sd run` asks on a terminal (`Allow issue_refund(order_id="A1", …)? [y/N/or type a
reason]`), decides every call with `--approve all|none`, denies without a terminal (with a
one-line note), or with `--pause-to FILE` writes the paused state and exits 4. `sd resume
FILE` decides the paused calls from its flags (or asks on a terminal) and continues; a
later call that needs approval pauses the run again into FILE.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from .display import RunDisplay, call_label
from .errors import EXIT_PAUSED, CliError
from .text import visible

PROMPT = "Allow {label}? [y/N/or type a reason] "
#: SPEC §29: a call that started in an earlier run and never finished
UNKNOWN_PROMPT = "{label} [h: it happened / r: it did not, run it now / N: deny, or type a reason] "
NO_TERMINAL_NOTE = (
    "note: no terminal to ask whether to allow {label}: denied, as every call that needs approval will be "
    "(--approve all|none decides every call; --pause-to FILE saves the run to decide later)\n"
)


def stdin_is_terminal() -> bool:
    """Whether a person can be asked (the tests replace this)."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def approve_flag(value: str | None) -> bool | None:
    if value is None:
        return None
    if value not in ("all", "none"):
        raise CliError(f"--approve takes all or none, not {value!r}")
    return value == "all"


def label_of(request: Any) -> str:
    """How the CLI shows a request: `refund(order="R7")`, or for a call whose outcome is
    unknown `outcome unknown: did refund(order="R7") happen?`."""
    label = call_label(request.tool_name, request.arguments)
    return f"outcome unknown: did {label} happen?" if getattr(request, "outcome", None) == "unknown" else label


def prompt_of(request: Any) -> str:
    if getattr(request, "outcome", None) == "unknown":
        return UNKNOWN_PROMPT.format(label=label_of(request))
    return PROMPT.format(label=label_of(request))


def answer_of(text: str, outcome: str | None = None) -> Any:
    """A person's answer: y/yes allows, empty/n/no denies, anything else is the reason the
    model reads. For a call whose outcome is unknown: h/happened (it did happen: it does not
    run), r/run/not happened (it did not: it runs now)."""
    answer = text.strip()
    if outcome == "unknown":
        from ..approval.state import Happened

        if answer.lower() in ("h", "happened", "it happened"):
            return Happened()
        if answer.lower() in ("r", "run", "not happened", "not-happened", "did not happen"):
            return True
    if answer.lower() in ("y", "yes"):
        return True
    if answer.lower() in ("", "n", "no"):
        return False
    return answer


class Prompter:
    """Asks on the terminal, one request at a time (the engine never asks two at once);
    the live display steps aside while it asks."""

    def __init__(self, display: RunDisplay | None) -> None:
        self.display = display

    async def __call__(self, request: Any) -> Any:
        prompt = prompt_of(request)
        suspended = self.display.suspended() if self.display is not None else nullcontext()
        with suspended:
            text = await read_line(prompt)
        return answer_of(text, getattr(request, "outcome", None))


async def read_line(prompt: str) -> str:
    """`input(prompt)` off the event loop, in a daemon thread: Ctrl-C at the prompt ends the
    run at once (a worker thread would be waited for until Enter)."""
    import asyncio
    import threading

    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def settle(text: str | None, error: BaseException | None) -> None:
        if answer.done():  # the run was cancelled meanwhile
            return
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(text or "")

    def read() -> None:
        text, error = "", None
        try:
            text = input(prompt)
        except EOFError:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting task
            error = exc
        try:
            loop.call_soon_threadsafe(settle, text, error)
        except RuntimeError:  # the run ended (Ctrl-C) while the prompt waited
            pass

    threading.Thread(target=read, name="struckdown-approval-prompt", daemon=True).start()
    return await answer


class DenyWithNote:
    """No terminal and no flag: every call that needs approval is denied, with one note."""

    def __init__(self) -> None:
        self.noted = False

    async def __call__(self, request: Any) -> bool:
        if not self.noted:
            self.noted = True
            sys.stderr.write(visible(NO_TERMINAL_NOTE.format(label=label_of(request))))
            sys.stderr.flush()
        return False


def decider(approve: str | None, pause_to: Path | None, display: RunDisplay | None) -> Any:
    """`approve=` for `sd run`: the flag, a pause, a terminal prompt, or deny with a note."""
    decided = approve_flag(approve)
    if decided is not None and pause_to is not None:
        raise CliError("--approve decides every call, so nothing would pause: give --approve or --pause-to")
    if decided is not None:
        return decided
    if pause_to is not None:
        return None
    return Prompter(display) if stdin_is_terminal() else DenyWithNote()


def write_pause(path: Path, paused: Any, cli: dict[str, Any]) -> None:
    """The state, with what `sd resume` needs to run it again (the flags of this run)."""
    from ..approval.signing import sign_state
    from .io import write_json

    state = dict(paused.state)
    state["extra"] = {**state.get("extra", {}), "cli": cli}
    write_json(path, sign_state(state))  # signed again: extra is covered too


def resume_flags(cli: dict[str, Any]) -> str:
    """The flags `sd resume` needs to load what the paused run loaded (it imports only
    what its command line names): `--tools FILE`, and `--model NAME` for a factory."""
    import shlex

    from ..models.factory import factory_reference

    flags = f" --tools {shlex.quote(str(cli['tools']))}" if cli.get("tools") else ""
    model = cli.get("model")
    if isinstance(model, str) and ":" in model and factory_reference(model) is not None:
        flags += f" --model {shlex.quote(model)}"
    for spec in cli.get("mcp") or ():  # SPEC §29: the MCP servers, given again (no --trust-state needed)
        flags += f" --mcp {shlex.quote(str(spec))}"
    if cli.get("mcp_config"):
        flags += f" --mcp-config {shlex.quote(str(cli['mcp_config']))}"
    factories = [n for n in cli.get("fallback") or () if ":" in n and factory_reference(n) is not None]
    if factories:  # a fallback model factory is code the state names: only with --trust-state
        flags += " --trust-state"
    return flags


def report_pause(paused: Any, path: Path, cli: dict[str, Any] | None = None) -> int:
    """What the user reads after a pause; the exit code 4."""
    lines = ["awaiting approval:"]
    lines += [f"  {r.id}  {label_of(r)}" for r in paused.requests]
    first = paused.requests[0].id if paused.requests else "ID"
    unknown = [r.id for r in paused.requests if getattr(r, "outcome", None) == "unknown"]
    if unknown:
        lines.append(
            f"  (outcome unknown: --happened {unknown[0]}[=RESULT] if it happened, --approve {unknown[0]} if it "
            f"did not (it runs now), --deny {unknown[0]} to deny it)"
        )
    lines.append(
        f"state written to {path}; continue with: sd resume {path}{resume_flags(cli or {})} --approve {first} "
        f"(or --deny {first}=REASON, --approve-all, --deny-all)"
    )
    sys.stderr.write(visible("\n".join(lines)) + "\n")
    sys.stderr.flush()
    return EXIT_PAUSED


# -- sd resume: decisions from flags -------------------------------------------------
def read_state_file(path: Path) -> dict[str, Any]:
    from .io import parse_json, read_text

    data = parse_json(read_text(path, "state file"), f"state file {path}")
    if not isinstance(data, dict) or "requests" not in data or "format" not in data:
        raise CliError(f"{path} is not the state of a paused run (sd run … --pause-to FILE writes one)")
    return data


def _answers(specs: Any, requests: list[Any]) -> dict[str, str]:
    """`--answer SLOT=VALUE`: the decision of the slot's `@answer` request (escalate=approve)."""
    from ..approval.state import ANSWER_TOOL

    by_slot = {r.slot: r.id for r in requests if r.tool_name == ANSWER_TOOL}
    decisions: dict[str, str] = {}
    for spec in specs:
        slot, sep, value = (part.strip() for part in str(spec).partition("="))
        if not sep or not slot or not value:
            raise CliError(f"--answer {spec!r}: give SLOT=VALUE")
        if slot not in by_slot:
            waiting = ", ".join(by_slot) or "none"
            raise CliError(f"--answer {spec!r}: no slot {slot!r} waits for an answer (waiting: {waiting})")
        decisions[by_slot[slot]] = value
    return decisions


def decisions_from_flags(request: Any, requests: list[Any], display: RunDisplay | None) -> dict[str, Any]:
    """`--approve ID`, `--deny ID[=REASON]`, `--approve-all`, `--deny-all`; on a terminal the
    rest are asked, else they are an error listing them."""
    if request.approve_all and request.deny_all:
        raise CliError("give --approve-all or --deny-all, not both")
    known = {r.id: r for r in requests}
    listed = ", ".join(f"{r.id} {label_of(r)}" for r in requests)
    decisions: dict[str, Any] = {}
    for rid in request.approve:
        decisions[rid] = True
    for spec in getattr(request, "happened", ()):
        from ..approval.state import Happened

        rid, sep, result = spec.partition("=")
        found = known.get(rid)
        if found is not None and found.outcome != "unknown":
            raise CliError(f"--happened {rid}: {label_of(found)} is not a call whose outcome is unknown; "
                           "use --approve or --deny")
        decisions[rid] = Happened(result.strip()) if sep and result.strip() else Happened()
    for spec in request.deny:
        rid, _, reason = spec.partition("=")
        decisions[rid] = reason.strip() or False
    decisions.update(_answers(getattr(request, "answer", ()), requests))
    unknown = sorted(set(decisions) - set(known))
    if unknown:
        raise CliError(f"no paused call has the id {', '.join(unknown)}; the paused calls are: {listed}")
    if request.approve_all or request.deny_all:
        for rid in known:
            decisions.setdefault(rid, request.approve_all)
    undecided = [r for r in requests if r.id not in decisions]
    if undecided and not stdin_is_terminal():
        missing = ", ".join(f"{r.id} {label_of(r)}" for r in undecided)
        raise CliError(f"decide every paused call ({missing}): --approve ID, --deny ID[=REASON], --approve-all or --deny-all")
    for r in undecided:
        try:
            text = input(prompt_of(r))
        except EOFError:
            text = ""
        decisions[r.id] = answer_of(text, r.outcome)
    return decisions
