"""One declaration per run option, one row per CLI flag (SPEC §22): the two tables agree, every
flag reaches the engine from every command that takes it, `sd resume` runs on with the paused
run's options, and what cannot be combined is refused before any model call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import struckdown as sd
from cli_support import sd as sd_cli
from struckdown.cli.options import RUN_COMMAND_FLAGS, RUN_FLAGS
from struckdown.run_options import DECLARED, OPTIONS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _spellings(flag: Any) -> set[str]:
    info = flag.annotation.__metadata__[0]  # typer's OptionInfo: the first spelling may sit in `default`
    return {d for d in (info.default, *info.param_decls) if isinstance(d, str) and d.startswith("-")}


def test_the_flag_table_and_the_option_rows_agree() -> None:
    """Every row (the run keywords and the batch calls' own) and every flag name each other."""
    for name, flag in RUN_FLAGS.items():
        declared = _spellings(flag)
        assert flag.option in DECLARED, name
        assert set(DECLARED[flag.option].flags) & set(declared), f"{name}: {flag.option}.flags names none of {declared}"
    for option in DECLARED.values():
        for spelled in option.flags:
            assert any(spelled in _spellings(f) for f in RUN_FLAGS.values()), spelled


def _samples(tmp_path: Path) -> dict[str, tuple[list[str], str, Any]]:
    """flag → (the words on the command line, the keyword, the value the run gets)."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"test": {"input": 1, "output": 2}}), encoding="utf-8")
    server = tmp_path / "server.py"
    server.write_text("", encoding="utf-8")
    return {
        "retries": (["--retries", "5"], "retries", 5),
        "max_tokens": (["--max-tokens", "77"], "settings", {"max_tokens": 77}),
        "seed": (["--seed", "3"], "settings", {"seed": 3}),
        "thinking": (["--thinking", "high"], "settings", {"thinking": "high"}),
        "fallback": (["--fallback", "test", "--fallback", "m2"], "fallback", ["test", "m2"]),
        "tool_timeout": (["--tool-timeout", "7.5"], "tool_timeout", 7.5),
        "max_seconds": (["--max-seconds", "42"], "max_seconds", 42.0),
        "on_truncate": (["--on-truncate", "error"], "on_truncate", "error"),
        "strict": (["--strict"], "strict_undefined", True),
        "no_cache": (["--no-cache"], "cache", False),
        "no_prompt_cache": (["--no-prompt-cache"], "prompt_cache", False),
        "no_loop_guard": (["--no-loop-guard"], "loop_guard", False),
        "max_cost": (["--max-cost", "2.5"], "max_cost", 2.5),
        "prices": (["--prices", str(prices)], "prices", {"test": {"input": 1, "output": 2}}),
        "mcp": (["--mcp", str(server)], "mcp", [str(server)]),
        "include_path": (["-I", str(tmp_path)], "include_paths", (tmp_path,)),
        "stop_at": (["--stop-at", "a"], "stop_at", "a"),
        "max_requests": (["--max-requests", "3"], "max_requests", 3),
        "journal": (["--journal", str(tmp_path / "run.journal")], "journal", tmp_path / "run.journal"),
        "rerun_from": (["--rerun-from", "a", "--journal", str(tmp_path / "rerun.journal")], "rerun_from", "a"),
        "private": (["--private", "email,name"], "private", ("email", "name")),
        "untrusted": (["--untrusted", "page"], "untrusted", ("page",)),
        "local_models": (["--local-models", "http://10.0.0.5:8080/v1/"], "local_models", ("http://10.0.0.5:8080/v1",)),
        "remote_models": (["--remote-models", "a,b"], "remote_models", ("a", "b")),
    }


#: Flags whose path to the engine another test follows (they need a file or an extra).
ELSEWHERE = {
    "model": "every CLI test passes --model",
    "tools": "tests/cli/test_cli.py (--tools files)",
    "mcp_config": "tests/mcp/test_mcp_cli.py (--mcp-config)",
    "otel": "tests/run/test_observability.py (needs struckdown[otel])",
    # the batch keywords' flags (sd batch's own; tests/run/test_batch_keywords.py holds them to the rows)
    "jobs": "tests/cli/test_cli_batch.py (-j)",
    "workers": "tests/cli/test_batch_workers.py (--workers)",
    "engine": "tests/cli/test_batch_workers.py, tests/cli/test_cli_batch.py (--engine)",
    "address": "tests/run/test_dask.py, tests/cli/test_durable_workers.py (--address)",
    "provider_batch": "tests/cli/test_cli_provider_batch.py (--provider-batch)",
    "batch_wait": "tests/cli/test_cli_provider_batch.py (--batch-wait)",
    "batch_size": "tests/cli/test_cli_provider_batch.py (--batch-size)",
}


def test_every_flag_has_a_sample_or_a_test_elsewhere(tmp_path: Path) -> None:
    assert set(_samples(tmp_path)) | set(ELSEWHERE) == set(RUN_FLAGS)


@pytest.mark.parametrize("command", ["run", "chat", "batch"])
def test_every_run_flag_reaches_the_engine(command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from struckdown.incremental import ProcessingComplete
    from struckdown.results import Result

    seen: dict[str, Any] = {}

    async def incremental(template: Any, context: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        yield ProcessingComplete(Result({}, ()))

    async def batch(template: Any, contexts: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        for index, _ in enumerate(contexts):
            yield index, Result({}, ())

    monkeypatch.setattr("struckdown.api.complete_incremental_async", incremental)
    monkeypatch.setattr("struckdown.api.complete_batch_iter_async", batch)
    template = tmp_path / "t.sd"
    template.write_text("A [[a]]\n", encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"x": 1}\n', encoding="utf-8")
    where = {"run": ["run", template], "chat": ["chat", "-p", template], "batch": ["batch", template, rows]}[command]
    taken = set(RUN_COMMAND_FLAGS) | {"stop_at"} if command != "batch" else set(RUN_COMMAND_FLAGS) | {"max_requests"}
    if command == "run":
        taken.update({"journal", "rerun_from"})
    for name, (words, keyword, value) in _samples(tmp_path).items():
        if name not in taken:
            continue
        seen.clear()
        result = sd_cli(*where, "--model", "test", *words)
        assert result.exit_code == 0, (name, result.output)
        got = seen.get(keyword)
        assert (tuple(got) if isinstance(value, tuple) else got) == value, (name, got)


def test_sd_resume_runs_with_the_paused_runs_options_and_its_own_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import struckdown.run.settings as settings_module

    built: list[Any] = []
    real = settings_module.build_settings

    def recording(*args: Any, **kwargs: Any) -> Any:
        built.append(real(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(settings_module, "build_settings", recording)
    monkeypatch.setenv("COLUMNS", "200")
    state = tmp_path / "s.json"
    run = ["run", EXAMPLES / "refund_agent.sd", "--context", EXAMPLES / "refund_agent.json", "--tools",
           EXAMPLES / "refund_tools.py", "--model", "cli_models:refund_agent", "--no-cache", "--max-tokens", "77",
           "--retries", "4", "--tool-timeout", "9", "--on-truncate", "error"]
    assert sd_cli(*run, "--pause-to", state).exit_code == 4
    recorded = json.loads(state.read_text())["options"]
    assert recorded["settings"] == {"max_tokens": 77} and recorded["retries"] == 4
    assert (recorded["cache"], recorded["tool_timeout"], recorded["on_truncate"]) == (False, 9.0, "error")
    built.clear()
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted": {"input": 1, "output": 1}}), encoding="utf-8")
    resumed = sd_cli("resume", state, "--trust-state", "--approve", "reply.1", "--retries", "1", "--max-cost", "3", "--prices", prices)
    assert resumed.exit_code == 0, resumed.output
    (settings,) = built
    assert settings.options["settings"] == {"max_tokens": 77} and settings.options["cache"] is False  # the state's
    assert (settings.options["tool_timeout"], settings.resilience.on_truncate) == (9.0, "error")
    assert settings.resilience.retries == 1 and settings.budget.max_cost == 3  # the flags'


def test_provider_batch_and_workers_are_refused_naming_both(tmp_path: Path) -> None:
    template = tmp_path / "t.sd"
    template.write_text("A [[a]]\n", encoding="utf-8")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"x": 1}\n', encoding="utf-8")
    result = sd_cli("batch", template, rows, "-o", tmp_path / "out.jsonl", "--model", "test", "--provider-batch",
                    "--workers", "2")
    assert result.exit_code == 2
    assert "--provider-batch and --workers cannot be combined" in result.output
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_every_option_travels_to_dask_workers_or_is_refused_by_name(name: str) -> None:
    from pydantic_ai.usage import UsageLimits

    from struckdown.distributed import ship_kwargs

    samples: dict[str, Any] = {
        "model": "test", "tools": ["json:dumps"], "deps": {"k": 1}, "deps_type": dict, "limits": UsageLimits(),
        "tool_timeout": 5.0, "max_seconds": 30.0, "max_tool_result": 1000, "max_requests": 3, "on_halt": "return", "settings": {"temperature": 0.1}, "cache": False,
        "template_path": "t.sd", "include_paths": ["."], "stop_at": "a", "strict_undefined": True,
        "mcp": "https://127.0.0.1:1/mcp", "approve": True, "run_limits": UsageLimits(request_limit=3),
        "max_cost": 1.0, "prices": {"test": {"input": 1, "output": 1}}, "tool_limits": {"t": 1}, "instrument": False,
        "image_max_side": 512, "max_images": 3, "retries": 2, "retry_base_delay": 0.5, "retry_max_delay": 2.0,
        "fallback": ["test"], "on_truncate": "error", "on_retry": print, "prompt_cache": False,
        "journal": "run.journal", "rerun_from": "a", "loop_guard": False, "private": ["email"], "untrusted": ["page"],
        "local_models": ["http://10.0.0.5/v1"], "remote_models": ["proxy"],
    }
    assert set(samples) == set(OPTIONS)
    if OPTIONS[name].ships == "no":
        with pytest.raises(ValueError, match=f"{name}= and a Dask batch"):
            ship_kwargs({name: samples[name]})
        return
    shipped = ship_kwargs({name: samples[name]})
    assert name in shipped


def test_per_call_options_are_refused_as_environment_defaults() -> None:
    with pytest.raises(TypeError, match="stop_at= is given per call"):
        sd.Environment(stop_at="a")  # type: ignore[call-arg]
    assert sd.Environment(retries=2).retries == 2


def test_a_bad_option_value_is_refused_at_the_call_on_every_entry_point() -> None:
    for call in (
        lambda: sd.complete("A [[a]]", model="test", on_truncate="maybe"),  # type: ignore[arg-type]
        lambda: sd.complete_batch("A [[a]]", [{}], model="test", on_truncate="maybe"),  # type: ignore[arg-type]
        lambda: sd.resume({}, {}, on_truncate="maybe"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match="on_truncate must be 'keep' or 'error'"):
            call()
