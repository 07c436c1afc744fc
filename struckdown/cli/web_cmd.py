"""`sd edit` and `sd serve`: the playground (struckdown.web) on uvicorn.

Starlette and uvicorn are imported only when one of these commands runs, so the
rest of the CLI starts as fast without the `web` extra installed.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .errors import CliError, reporting_errors

PortOpt = Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0: a free one).")]
ModelsOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--models",
        help="Model strings the page may pick (repeatable or comma-separated); the first is the default.",
        show_default=False,
    ),
]
TimeOpt = Annotated[float, typer.Option("--time-limit", help="Seconds one check, run or batch may take.")]


def edit(
    path: Annotated[Path, typer.Argument(help="The folder (or a .sd file in it) to work on.")] = Path("."),
    port: PortOpt = 0,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser.")] = False,
    models: ModelsOpt = None,
    time_limit: TimeOpt = 600.0,
    tools: Annotated[
        Optional[list[Path]],
        typer.Option("--tools", "-t", help="A .py tools file the page may pick (repeatable); no other file runs.",
                     show_default=False),
    ] = None,
) -> None:
    """Open the playground on a folder: edit, check, run and batch its templates (127.0.0.1 only)."""
    with reporting_errors():
        from ..web.config import WebConfig
        from ..web.pool import PoolLimits

        folder, first = (path.parent, path.name) if path.is_file() else (path, None)
        if not folder.is_dir():
            raise CliError(f"{path} is not a folder")
        for tool in tools or ():
            if not tool.is_file() or tool.suffix != ".py":
                raise CliError(f"tools file {tool} is not a .py file")
        token = secrets.token_urlsafe(18)
        config = WebConfig(
            mode="edit",
            tokens=(token,),
            root=folder.resolve(),
            tool_files=tuple(dict.fromkeys(tool.resolve() for tool in tools or ())),
            models=_split(models),
            max_body_bytes=20_000_000,
            rate_per_minute=0,
            limits=PoolLimits(time_limit_s=time_limit, output_bytes=64_000_000, memory_mb=2048),
        )
        _serve(config, "127.0.0.1", port, token, open_browser=not no_browser, first=first)


def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to bind; anything but loopback needs a key.")] = "127.0.0.1",
    port: PortOpt = 8700,
    api_key: Annotated[
        Optional[list[str]],
        typer.Option(
            "--api-key",
            help="Bearer token clients send (repeatable, one per user or team). Shows in the process list: "
            "prefer --api-key-file or STRUCKDOWN_API_KEY (comma-separated). On loopback without one, a random "
            "token is made and printed.",
            show_default=False,
        ),
    ] = None,
    api_key_file: Annotated[
        Optional[Path],
        typer.Option(
            "--api-key-file",
            help="A file of bearer tokens, one a line (# comments); not visible to other users like a flag is.",
            show_default=False,
        ),
    ] = None,
    models: ModelsOpt = None,
    allow_factories: Annotated[
        bool,
        typer.Option(
            "--allow-factories",
            help="Let --models name package.module:factory models (their Python runs in the workers).",
        ),
    ] = False,
    tools: Annotated[
        Optional[Path], typer.Option("--tools", "-t", help="The only tools runs may use.", show_default=False)
    ] = None,
    max_body: Annotated[int, typer.Option("--max-body", help="Largest request body in bytes (413 above).")] = 1_000_000,
    rate: Annotated[
        int, typer.Option("--rate", help="Runs and batches a minute per key, checks ten times that (429 above; 0: off).")
    ] = 60,
    time_limit: TimeOpt = 60.0,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Template jobs at the same time.")] = 4,
    memory_mb: Annotated[int, typer.Option("--memory-mb", min=64, help="Memory one job may allocate.")] = 512,
    api: Annotated[
        Optional[Path],
        typer.Option(
            "--api",
            help="Serve each T.sd of this folder as POST /v1/templates/T, with /openapi.json and /docs.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the playground to a team: templates arrive in requests, no file access, no network actions."""
    with reporting_errors():
        from ..web.config import LOOPBACK_HOSTS, WebConfig
        from ..web.pool import PoolLimits

        keys = _keys(api_key, api_key_file)
        printed = None
        if not keys:
            if host not in LOOPBACK_HOSTS:
                raise CliError(
                    f"refusing to serve on {host} without a key: pass --api-key-file or --api-key, "
                    "or set STRUCKDOWN_API_KEY"
                )
            printed = secrets.token_urlsafe(18)
            keys = (printed,)
        if tools is not None and not tools.is_file():
            raise CliError(f"tools file {tools} does not exist")
        allowed = _split(models)
        if not allow_factories:
            from ..web.policy import is_factory

            for name in allowed:
                if is_factory(name):
                    raise CliError(f"--models {name}: a module:factory name runs Python in the workers; "
                                   "pass --allow-factories to serve it")
        if api is not None and not api.is_dir():
            raise CliError(f"--api {api}: not a folder")
        if api is not None and not any(api.glob("*.sd")):
            raise CliError(f"--api {api}: no .sd templates in it")
        config = WebConfig(
            mode="serve",
            api_root=api.resolve() if api is not None else None,
            tokens=keys,
            models=allowed,
            allow_factories=allow_factories,
            tools_file=tools.resolve() if tools else None,
            max_body_bytes=max_body,
            rate_per_minute=rate,
            limits=PoolLimits(workers=workers, time_limit_s=time_limit, memory_mb=memory_mb),
        )
        _serve(config, host, port, printed, open_browser=False)


def _keys(flags: Optional[list[str]], path: Optional[Path]) -> tuple[str, ...]:
    """The API keys: --api-key-file, then --api-key (with a warning: a flag shows in
    /proc/PID/cmdline and `ps` to every user of the machine), then STRUCKDOWN_API_KEY."""
    keys: list[str] = []
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"--api-key-file {path}: cannot read it ({exc})") from None
        keys += [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
        if not keys:
            raise CliError(f"--api-key-file {path} holds no key")
    if flags:
        sys.stderr.write("warning: --api-key is visible to every user of this machine (ps, /proc/PID/cmdline); "
                         "use --api-key-file or STRUCKDOWN_API_KEY\n")
        keys += _split(flags)
    if not keys:
        keys += _split([os.environ.get("STRUCKDOWN_API_KEY", "")])
    return tuple(dict.fromkeys(keys))


def _split(values: Optional[list[str]]) -> tuple[str, ...]:
    return tuple(part.strip() for value in values or () for part in value.split(",") if part.strip())


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound and listening (port 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said, not left at 0: asyncio sets TCP_NODELAY only on sockets that say it,
    # and without it each request after the first on a kept-alive connection waits ~40 ms
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}", code=1) from None
    sock.listen(128)
    return sock


def _serve(config: Any, host: str, port: int, token: str | None, *, open_browser: bool, first: str | None = None) -> None:
    try:
        import uvicorn

        from ..web.app import create_app

        app = create_app(config)  # sd serve --api: its templates are read and checked here, before listening
    except ImportError as exc:
        raise CliError(f"the playground needs the web extra: pip install 'struckdown[web]' ({exc.name} is missing)")
    sock = listening_socket(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    if token:
        url += f"?token={token}"
    if first:
        from urllib.parse import quote

        url += ("&" if token else "?") + "file=" + quote(first)
    sys.stdout.write(f"struckdown playground ({config.mode}) on {url}\n")
    if config.api_root is not None:
        docs = f"http://{shown}:{bound}/docs" + (f"?token={token}" if token else "")
        sys.stdout.write(f"templates of {config.api_root} at http://{shown}:{bound}/v1/templates/NAME; docs on {docs}\n")
    sys.stdout.flush()
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
