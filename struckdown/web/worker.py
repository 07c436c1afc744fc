"""A worker process: the template work of the playground runs here, not in the server.

Why a process: a template from a stranger can ask for `'x'|center(10**9)` or a
loop that never ends. The sandbox refuses the bombs it knows; a process with an
address-space limit turns every other allocation bomb into a MemoryError, and the
server can kill it at the request's time limit, whatever it is doing. The server
stays one event loop that only moves bytes.

Workers are forked from a multiprocessing fork server that imported everything
once (`preload.py`), so a new worker is ready in milliseconds and killing one costs
nothing. Protocol over a socket pair: one JSON job a line in; JSON messages, one a
line, out, each job ending with `{"type": "_end"}`. The first message is
`{"type": "_ready"}`, sent once the limits are set.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import socket
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

Send = Callable[[dict[str, Any]], None]


def child_main(channel: socket.socket, memory_mb: int, shared: bool, env: dict[str, str], folder: str) -> None:
    """A worker's life, forked from the warm fork server: jobs in, messages out, over `channel`.
    `folder` is its temporary folder (the server removes it when the worker is gone)."""
    os.environ.clear()
    os.environ.update(env)  # the server's environment when it asked for this worker
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = folder  # every temporary file of a job goes there
    for entry in reversed(env.get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    sys.stdout = sys.stderr  # a print() in a tools file must not reach the protocol
    if shared:
        os.environ.pop("STRUCKDOWN_ALLOW_FETCH", None)
        os.chdir(tempfile.mkdtemp(prefix="cwd-", dir=folder))  # includes resolve against an empty folder
    _warm_up()
    if memory_mb > 0:
        _limit_memory(memory_mb)
    jobs = channel.makefile("r", encoding="utf-8")
    worker = Worker(channel.makefile("w", encoding="utf-8"), shared=shared)
    worker.send({"type": "_ready", "pid": os.getpid()})
    for line in jobs:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except ValueError:
            worker.send({"type": "processing_error", "slot": None, "error": "the worker got a malformed job"})
        else:
            asyncio.run(worker.handle(job))
        worker.send({"type": "_end"})


def _warm_up() -> None:
    """Import what every job needs, so a job starts in milliseconds."""
    import pydantic_ai  # noqa: F401
    import rich.console  # noqa: F401 - the plan view draws with rich (struckdown.explain.plan.plan_text)
    import rich.tree  # noqa: F401

    from .. import api, lint, plan, run  # noqa: F401
    from .. import check as _check_stage  # noqa: F401
    from ..batch import output, tables  # noqa: F401
    from ..explain import plan as _plan_tree  # noqa: F401
    from ..tools import files  # noqa: F401
    from . import engine  # noqa: F401

    for optional in ("pydantic_ai.models.openai", "pydantic_ai.models.test", "pydantic_ai.models.function"):
        try:
            importlib.import_module(optional)  # what a first run would import
        except ImportError:
            pass


def _limit_memory(headroom_mb: int) -> None:
    """Address space = what the warm worker uses + the headroom: a bigger allocation
    is a MemoryError in that job, not the machine's swap."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[0])
        current = pages * os.sysconf("SC_PAGE_SIZE")
        limit = current + headroom_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, OSError, ValueError):  # not Linux: the time limit still holds
        pass


class Worker:
    def __init__(self, protocol: TextIO, *, shared: bool) -> None:
        self.protocol = protocol
        self.shared = shared

    def send(self, message: dict[str, Any]) -> None:
        self.protocol.write(json.dumps(message, ensure_ascii=False, default=str) + "\n")
        self.protocol.flush()

    def template_path(self, job: dict[str, Any]) -> Path:
        if self.shared or not job.get("path"):
            return Path.cwd() / "template.sd"
        return Path(job["path"])

    async def handle(self, job: dict[str, Any]) -> None:
        from . import engine

        op = job.get("op")
        try:
            if op == "check":
                self.check(job)
            elif op == "explain":
                self.explain(job)
            elif op == "tools":
                self.send({"type": "tools", "tools": engine.tool_names(engine.load_tools(job.get("tools")))})
            elif op == "run":
                await self.run(job)
            elif op == "batch":
                await self.batch(job)
            else:
                self.send({"type": "processing_error", "slot": None, "error": f"unknown job {op!r}"})
        except MemoryError:
            self.send({"type": "processing_error", "slot": None, "error": "MemoryLimitExceeded: the template "
                       "asked for more memory than this server allows"})
        except engine.Refused as exc:
            self.send({"type": "refused", "error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - every failure is an answer to the page
            diagnostic = engine.syntax_error(exc)
            if diagnostic is not None:
                self.send({"type": "diagnostics", "diagnostics": [diagnostic]})
            else:
                traceback.print_exc(file=sys.stderr)
                self.send({"type": "processing_error", "slot": None, "error": engine.describe_error(exc)})

    # -- jobs ----------------------------------------------------------------------
    def _context(self, job: dict[str, Any]) -> dict[str, Any]:
        from . import engine

        try:
            return engine.parse_context(job.get("context"), job.get("context_kind", "json"))
        except Exception as exc:  # noqa: BLE001 - JSON and YAML errors alike
            raise ValueError(f"context: {exc}") from None

    def check(self, job: dict[str, Any]) -> None:
        from . import engine

        names: set[str] | None = None
        context_error = None
        if job.get("context") and job["context"].strip():
            try:
                names = set(self._context(job))
            except ValueError as exc:
                context_error = str(exc)
        found = engine.diagnostics(
            job["template"], self.template_path(job), names, tools_given=bool(job.get("tools"))
        )
        if not any(d["severity"] == "error" for d in found):
            from .policy import ModelPolicy

            program = engine.compile_text(job["template"], self.template_path(job))
            if self.shared:
                found += engine.network_actions(program)
            if "policy" in job:
                found += engine.model_refusals(program, ModelPolicy.from_dict(job["policy"]))
        self.send({"type": "diagnostics", "diagnostics": found, "context_error": context_error})

    def explain(self, job: dict[str, Any]) -> None:
        from . import engine

        program = engine.compile_text(job["template"], self.template_path(job))
        tools = engine.load_tools(job.get("tools"))
        title = Path(job["path"]).name if job.get("path") and not self.shared else "template"
        self.send({"type": "plan", "plan": engine.explain(program, tools, title)})

    def _prepare(self, job: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
        from . import engine
        from .policy import ModelPolicy

        program = engine.compile_text(job["template"], self.template_path(job))
        if self.shared:
            engine.refuse_network_actions(program)
        policy = ModelPolicy.from_dict(job.get("policy")) if self.shared or "policy" in job else ModelPolicy()
        engine.refuse_models(program, policy)  # SPEC §17, §30: before any model is resolved or called
        engine.use_policy(program, policy)  # and every resolution of the run asks it again
        model = engine.resolve_model(job.get("model") or None)
        tools = engine.load_tools(job.get("tools"))
        return program, model, tools

    async def run(self, job: dict[str, Any]) -> None:
        from ..approval.signing import using_state_key

        # SPEC §12 / issue 39 N6: paused states are signed with the server's key for the
        # API key that asked, so only that key can decide and resume them
        key = job.get("state_key")
        if key is None:
            await self._run(job)
            return
        with using_state_key(bytes.fromhex(key)):
            await self._run(job)

    async def _run(self, job: dict[str, Any]) -> None:
        from . import engine

        resume = job.get("resume")  # SPEC §12: the state of a paused run and the page's decisions
        if resume is not None:
            from .policy import ModelPolicy

            # signed for this API key, and its recorded models allowed: before anything is loaded
            engine.check_state(resume["state"], ModelPolicy.from_dict(job.get("policy")) if self.shared else ModelPolicy())
        program, model, tools = self._prepare(job)
        context = self._context(job)
        self.send({"type": "run_started", "slots": list(program.keys)})
        failed = False
        if resume is not None:
            events = engine.resume_events(
                program, resume["state"], resume["decisions"], model=model, tools=tools,
                cache=bool(job.get("cache")), shared=self.shared,
            )
        else:
            events = engine.run_events(
                program, context, model=model, tools=tools, cache=bool(job.get("cache")), shared=self.shared
            )
        try:
            async for event in events:
                failed = failed or event["type"] == "processing_error"
                self.send(event)
        except MemoryError:
            raise
        except Exception:
            if not failed:  # the engine reports its own errors as an event first
                raise

    async def batch(self, job: dict[str, Any]) -> None:
        from . import engine

        program, model, tools = self._prepare(job)
        folder = Path(job["folder"])
        uploaded = Path(job.get("filename") or "rows.jsonl").name
        source = folder / ("input" + Path(uploaded).suffix.lower())
        source.write_text(job["content"], encoding="utf-8")
        try:
            rows = engine.read_rows(source)
        except Exception as exc:  # noqa: BLE001 - a bad upload is an answer to the page
            self.send({"type": "processing_error", "slot": None, "error": engine.upload_error(exc, source, uploaded)})
            return
        total = len(rows)
        most = job.get("max_rows")
        if isinstance(most, int) and total > most:  # issue 47: a batch's rows are runs of the key's rate
            raise engine.Refused(f"the upload holds {total:,} rows; this server runs at most {most:,} rows a batch "
                                 "(the runs one API key may start a minute)")
        self.send({"type": "batch_started", "total": total})
        done = failed = cached = 0

        def on_row(index: int, entry: dict[str, Any]) -> None:
            nonlocal done, failed, cached
            done += 1
            failed += 0 if entry["ok"] else 1
            cached += entry.get("cached", 0)
            self.send({"type": "batch_row", "index": index, "ok": entry["ok"], "error": entry["error"],
                       "answers": entry["answers"], "done": done, "failed": failed, "total": total,
                       "cached": entry.get("cached", 0)})

        entries = await engine.run_batch(
            program, rows, model=model, tools=tools, jobs=int(job.get("jobs") or 4),
            cache=bool(job.get("cache")), on_row=on_row, shared=self.shared,
        )
        formats = []
        for suffix in ("jsonl", "csv"):
            engine.write_rows(folder / f"output.{suffix}", rows, entries, program.keys)
            formats.append(suffix)
        self.send({"type": "batch_complete", "total": total, "failed": failed, "cached": cached, "formats": formats})

