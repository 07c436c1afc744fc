"""The eval file (`NAME.eval.yaml`, SPEC §23): read with positions, checked before any request.

A mistake is an `EvalFileError` naming the file, line and column, the key, and what was
expected. The YAML is composed (PyYAML's node tree keeps marks) and walked here, so every
value knows where it came from; `rows: FILE.csv|jsonl` turns each row of a table into a case
(its `expect.<slot>` columns are the gold answers, the other columns the context).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..wording import counted
from .expect import Expectation, parse_expectation

TOP_KEYS = ("template", "models", "repeat", "cases")
CASE_KEYS = ("name", "context", "expect", "rows")
#: SPEC §30: what each key's value reaches ("model", "file", "code", "network"); every key of
#: TOP_KEYS and CASE_KEYS has its row (tests/test_authority.py walks them). `expect:` names a
#: model when an expectation is a judge (`judge: {rubric, model}`).
KEY_AUTHORITY: dict[str, frozenset[str]] = {
    "template": frozenset({"file"}), "models": frozenset({"model"}), "repeat": frozenset(), "cases": frozenset(),
    "name": frozenset(), "context": frozenset(), "expect": frozenset({"model"}), "rows": frozenset({"file"}),
}
#: SPEC §30: `sd eval` refuses more runs (cases × models × repeats) than this unless told otherwise.
MAX_RUNS = 10_000
#: Values an eval file's YAML may expand to, aliases counted as often as they are used: an alias
#: bomb (a few lines that expand to billions) is a positioned error, never a MemoryError.
MAX_YAML_VALUES = 1_000_000


class EvalFileError(InputError):
    """A malformed eval file: `file:line:col: key: what was expected` (`sd` exits with 2)."""

    def __init__(self, path: str, line: int, column: int, key: str, problem: str) -> None:
        self.path, self.line, self.column, self.key, self.problem = path, line, column, key, problem
        super().__init__(f"{path}:{line}:{column}: {key}: {problem}")


@dataclass(frozen=True)
class Where:
    """A position in an eval file (1-based), for the errors found after reading (unknown slots)."""

    path: str
    line: int
    column: int

    def error(self, key: str, problem: str) -> EvalFileError:
        return EvalFileError(self.path, self.line, self.column, key, problem)


@dataclass(frozen=True)
class EvalCase:
    name: str
    context: dict[str, Any]
    expect: dict[str, Expectation]  # slot key (or tools / halted / usage) → what its answer must be
    where: Where
    expect_where: dict[str, Where] = field(default_factory=dict)

    def gold(self) -> dict[str, Any]:
        """The slots whose expectation is a plain answer (equality): the gold answers blame puts in place."""
        return {key: e.value for key, e in self.expect.items() if e.kind == "equals"}


@dataclass(frozen=True)
class EvalSuite:
    template: Path | None
    models: tuple[str, ...]
    repeat: int
    cases: tuple[EvalCase, ...]
    path: str = "<cases>"


# -- reading ---------------------------------------------------------------------------
def load_suite(path: Path) -> EvalSuite:
    """An eval file, checked: every problem is positioned and found before any request."""
    import yaml

    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{name}: cannot read the eval file: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        raise EvalFileError(name, line, column, "yaml", str(exc.problem or exc)) from None
    except yaml.YAMLError as exc:
        raise EvalFileError(name, 1, 1, "yaml", str(exc)) from None
    if root is None:
        raise EvalFileError(name, 1, 1, "cases", "the file is empty: give `cases:` (a list of cases)")
    bound_aliases(root, name)
    return suite_from_node(root, name, path.parent)


def bound_aliases(root: Any, name: str, limit: int = MAX_YAML_VALUES) -> None:
    """Refuse a YAML document that expands to more than `limit` values, each alias counted as
    often as it is used (in linear time: the size of each node is counted once), at the
    innermost node that crosses the limit."""
    import yaml

    sizes: dict[int, int] = {}  # node id → values it expands to (0: being counted, a recursive alias)

    def size(node: Any) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return max(known, 1)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            sizes[id(node)] = 1
            return 1
        sizes[id(node)] = 0
        total = 1 + sum(size(child) for child in children)
        if total > limit:
            mark = node.start_mark
            raise EvalFileError(
                name, mark.line + 1, mark.column + 1, "yaml",
                f"the aliases here expand to more than {limit:,} values (an alias bomb?); write the values out",
            )
        sizes[id(node)] = total
        return total

    size(root)


def count_runs(suite: EvalSuite, models: int, repeat: int, max_runs: int | None = MAX_RUNS) -> int:
    """cases × models × repeats, refused (naming the numbers) when more than `max_runs`,
    before anything runs."""
    total = len(suite.cases) * models * repeat
    if max_runs is not None and total > max_runs:
        raise InputError(
            f"{suite.path}: {counted(len(suite.cases), 'case')} × {counted(models, 'model')} × "
            f"{counted(repeat, 'repeat')} = {total:,} runs, more than --max-runs {max_runs:,}; "
            "lower repeat: or the models, or raise --max-runs"
        )
    return total


def suite_from_data(data: Mapping[str, Any] | Sequence[Any], base: Path | None = None) -> EvalSuite:
    """The Python API's `cases=`: a mapping as the file holds, or a list of cases."""
    import yaml

    document = dict(data) if isinstance(data, Mapping) else {"cases": list(data)}
    text = yaml.safe_dump(json.loads(json.dumps(document, default=str)), sort_keys=False, allow_unicode=True)
    items = document.get("cases")
    # the contexts as given (an sd.Image stays an image; the YAML only checks the shape)
    contexts = [item.get("context") if isinstance(item, Mapping) else None for item in items] if isinstance(
        items, (list, tuple)) else None
    return suite_from_node(yaml.compose(text, Loader=yaml.SafeLoader), "<cases>", base or Path.cwd(), contexts)


def suite_from_node(root: Any, name: str, base: Path, contexts: Sequence[Any] | None = None) -> EvalSuite:
    reader = _Reader(name, base, contexts)
    top = reader.mapping(root, "eval file", TOP_KEYS)
    template = reader.text(top["template"], "template") if "template" in top else None
    models: tuple[str, ...] = ()
    if "models" in top:
        node = top["models"]
        items = node.value if _is_seq(node) else [node]
        models = tuple(reader.text(item, "models") for item in items)
        if not models:
            raise reader.error(node, "models", "a list of model names (or leave `models:` out)")
    repeat = 1
    if "repeat" in top:
        value = reader.plain(top["repeat"])
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise reader.error(top["repeat"], "repeat", f"a whole number of at least 1, not {value!r}")
        repeat = value
    if "cases" not in top:
        raise reader.error(root, "cases", "missing: give `cases:` (a list of cases)")
    cases_node = top["cases"]
    if not _is_seq(cases_node):
        raise reader.error(cases_node, "cases", "a list of cases (each `- name: …`), not a single value")
    cases: list[EvalCase] = []
    for index, item in enumerate(cases_node.value):
        cases.extend(reader.case(item, index))
    if not cases:
        raise reader.error(cases_node, "cases", "no cases: give at least one")
    seen: dict[str, EvalCase] = {}
    for case in cases:
        if case.name in seen:
            raise case.where.error("name", f"{case.name!r} names two cases (the first at line {seen[case.name].where.line})")
        seen[case.name] = case
    return EvalSuite(
        template=(base / template) if template else None, models=models, repeat=repeat, cases=tuple(cases), path=name,
    )


def _is_seq(node: Any) -> bool:
    import yaml

    return isinstance(node, yaml.SequenceNode)


class _Reader:
    def __init__(self, path: str, base: Path, contexts: Sequence[Any] | None = None) -> None:
        import yaml

        self.path, self.base, self.contexts = path, base, contexts
        self.loader = yaml.SafeLoader("")

    def where(self, node: Any) -> Where:
        return Where(self.path, node.start_mark.line + 1, node.start_mark.column + 1)

    def error(self, node: Any, key: str, problem: str) -> EvalFileError:
        return self.where(node).error(key, problem)

    def plain(self, node: Any) -> Any:
        return self.loader.construct_document(node) if node is not None else None

    def mapping(self, node: Any, what: str, allowed: Sequence[str] | None = None) -> dict[str, Any]:
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, what, f"a mapping (key: value lines), not {_shown(self.plain(node))}")
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = self.plain(key_node)
            if not isinstance(key, str):
                raise self.error(key_node, what, f"keys are names, not {key!r}")
            if allowed is not None and key not in allowed:
                raise self.error(key_node, key, f"unknown key in the {what}; expected one of {', '.join(allowed)}")
            if key in out:
                raise self.error(key_node, key, f"given twice in the {what}")
            out[key] = value_node
        return out

    def text(self, node: Any, key: str) -> str:
        value = self.plain(node)
        if not isinstance(value, str) or not value.strip():
            raise self.error(node, key, f"a name, not {_shown(value)}")
        return value

    def case(self, node: Any, index: int) -> list[EvalCase]:
        fields_ = self.mapping(node, f"case {index + 1}", CASE_KEYS)
        if "rows" in fields_:
            extra = sorted(set(fields_) - {"rows", "name"})
            if extra:
                raise self.error(fields_[extra[0]], extra[0], "a `rows:` item takes no other keys than `name:`")
            prefix = self.text(fields_["name"], "name") if "name" in fields_ else None
            return self.rows(fields_["rows"], prefix)
        name = self.text(fields_["name"], "name") if "name" in fields_ else f"case {index + 1}"
        context: dict[str, Any] = {}
        if "context" in fields_:
            self.mapping(fields_["context"], "context")
            given = self.contexts[index] if self.contexts is not None and index < len(self.contexts) else None
            context = dict(given) if isinstance(given, Mapping) else dict(self.plain(fields_["context"]))
        if "expect" not in fields_:
            raise self.error(node, "expect", f"case {name!r} has no `expect:` (what its answers must be)")
        expect_node = fields_["expect"]
        entries = self.mapping(expect_node, "expect")
        if not entries:
            raise self.error(expect_node, "expect", "at least one expectation")
        expect: dict[str, Expectation] = {}
        places: dict[str, Where] = {}
        for key, value_node in entries.items():
            try:
                expect[key] = parse_expectation(key, self.plain(value_node))
            except ValueError as exc:
                raise self.error(value_node, f"expect.{key}", str(exc)) from None
            places[key] = self.where(value_node)
        return [EvalCase(name, context, expect, self.where(node), places)]

    def rows(self, node: Any, prefix: str | None) -> list[EvalCase]:
        name = self.text(node, "rows")
        path = self.base / name
        where = self.where(node)
        try:
            if path.suffix.lower() == ".csv":
                with path.open(encoding="utf-8", newline="") as handle:
                    table: list[tuple[int, dict[str, Any]]] = [(i + 2, dict(r)) for i, r in enumerate(csv.DictReader(handle))]
            elif path.suffix.lower() in (".jsonl", ".ndjson"):
                table = []
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if not isinstance(item, dict):
                        raise where.error("rows", f"{name}:{number}: each line is a JSON object")
                    table.append((number, item))
            else:
                raise where.error("rows", f"a .csv or .jsonl file, not {name!r}")
        except OSError as exc:
            raise where.error("rows", f"cannot read {name}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise where.error("rows", f"{name}:{exc.lineno}: not JSON: {exc.msg}") from None
        cases: list[EvalCase] = []
        for number, row in table:
            context = {k: v for k, v in row.items() if not k.startswith("expect.") and k != "name"}
            expect: dict[str, Expectation] = {}
            for column, value in row.items():
                if column.startswith("expect.") and value not in (None, ""):
                    key = column[len("expect."):]
                    try:
                        expect[key] = parse_expectation(key, value)
                    except ValueError as exc:
                        raise where.error(column, f"{name}:{number}: {exc}") from None
            if not expect:
                raise where.error("rows", f"{name}:{number}: the row has no `expect.<slot>` value")
            label = str(row.get("name") or f"{prefix or Path(name).stem} row {number - 1 if path.suffix == '.csv' else number}")
            cases.append(EvalCase(label, context, expect, where, {k: where for k in expect}))
        if not cases:
            raise where.error("rows", f"{name} holds no rows")
        return cases


def _shown(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return repr(value)


def check_slots(suite: EvalSuite, keys: Sequence[str], template_name: str) -> None:
    """Every expectation names a slot of the template (or tools / halted / usage): before any request."""
    from .expect import RUN_KEYS

    known = set(keys)
    for case in suite.cases:
        for key in case.expect:
            if key in RUN_KEYS or key in known:
                continue
            where = case.expect_where.get(key, case.where)
            raise where.error(
                f"expect.{key}",
                f"{template_name} has no slot {key!r} (its slots: {', '.join(keys) or 'none'}; "
                f"or tools, halted, usage)",
            )
