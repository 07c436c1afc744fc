"""The compiled plan of a template as a tree, straight from the Program: what `sd explain`
prints, the playground's plan view and the language server's guard notes.

The tree is plain data (`Branch`es of `Label`s: text with a style name per span), so
the library needs no terminal library; `to_rich` turns it into a `rich` tree and
`plan_text` into plain text (both import rich only when called).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tools.files import describe_tool
from ..wording import counted
from .words import limit_text, quantity

PREVIEW = 60
GUARD_JOINS = (
    "the first streamed token, a tool slot whose tools are not all @readonly, "
    "the second model call after it starts, a side-effecting action, the end of the run"
)


class Label:
    """A line of the tree: its text in a base style, then spans each in a style of its
    own (rich's style names: "bold", "dim cyan", …)."""

    def __init__(self, text: str = "", style: str = "") -> None:
        self.text = text
        self.style = style
        self.spans: list[tuple[str, str | None]] = []

    def append(self, text: str, style: str | None = None) -> Label:
        self.spans.append((text, style))
        return self

    @property
    def plain(self) -> str:
        return self.text + "".join(text for text, _ in self.spans)


class Branch:
    """A node of the tree: a label (a `Label`, or a str that rich reads as markup) and
    the branches under it, in order."""

    def __init__(self, label: Label | str) -> None:
        self.label = label
        self.children: list[Branch] = []

    def add(self, label: Label | str) -> Branch:
        child = Branch(label)
        self.children.append(child)
        return child


def to_rich(branch: Branch) -> Any:
    """The tree as a `rich.tree.Tree` (rich imported now)."""
    from rich.text import Text
    from rich.tree import Tree

    def label(value: Label | str) -> Any:
        if isinstance(value, str):
            return value
        text = Text(value.text, style=value.style)
        for part, style in value.spans:
            text.append(part, style=style)
        return text

    def build(node: Branch, tree: Any) -> Any:
        for child in node.children:
            build(child, tree.add(label(child.label)))
        return tree

    return build(branch, Tree(label(branch.label)))


def plan_text(program: Any, tools: Sequence[Any], title: str, *, width: int = 110) -> str:
    """The plan tree as plain text, as `sd explain` draws it without colour."""
    import io

    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False, no_color=True)
    console.print(to_rich(PlanTree(program, list(tools)).build(title)))
    return buffer.getvalue()


def preview(source: str) -> str:
    text = " ".join(source.split())
    return '"' + (text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…") + '"'


def option_value(value: Any) -> str:
    from ..syntax.nodes import JinjaValue

    if isinstance(value, JinjaValue):
        return "{{ " + value.expression + " }}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class PlanTree:
    def __init__(self, program: Any, tools: list[Any]) -> None:
        from ..limits import Limits

        self.program = program
        self.tools = [describe_tool(t) for t in tools]
        self.needs_approval: set[str] = set()  # the host's marks (SPEC §12)
        if tools:
            from ..tools import host_needs_approval, tool_name

            self.needs_approval = {tool_name(t) for t in tools if host_needs_approval(t)}
        self.ceiling = Limits.of(program.environment.limits)
        self._parent: Branch = Branch("")
        self._in_together = False
        self._prompt_reads: set[str] = set()

    def build(self, title: str) -> Branch:
        tree = Branch(Label(title, style="bold"))
        c = self.ceiling
        tree.add(
            f"limits per slot: {c.request_limit} requests · {c.tool_calls_limit} tool calls · "
            f"{c.output_tokens_limit:,} output tokens (max_iter / max_calls lower them, never raise them)"
        )
        self._tools_branch(tree)
        for segment in self.program.segments:
            waits = segment.waits_for
            label = Label(f"segment {segment.index}", style="bold magenta")
            if segment.name:
                label.append(f" {segment.name!r}", style="magenta")
            label.append(f" — waits for: {', '.join(waits)}" if waits else " — starts at once", style="dim")
            if segment.index:
                label.append(" · fresh conversation", style="dim")
            self._nodes(tree.add(label), segment.nodes, in_together=False)
        return tree

    def _tools_branch(self, tree: Branch) -> None:
        if not self.tools:
            tree.add(Label("tools: none given (tool slots need --tools FILE.py at run time)", style="dim"))
            return
        branch = tree.add("tools")
        for name, summary, readonly in self.tools:
            line = Label(name, style="bold")
            line.append(f"{summary}")
            if readonly:
                line.append("  @readonly", style="green")
            if name in self.needs_approval:
                line.append("  @needs_approval", style="yellow")
            branch.add(line)

    # -- nodes: one method per node class ---------------------------------------
    def _nodes(self, parent: Branch, nodes: Sequence[Any], *, in_together: bool) -> None:
        """Add `nodes` under `parent`; a guard shows what the text since the last slot reads."""
        saved = (self._parent, self._in_together, self._prompt_reads)
        self._parent, self._in_together, self._prompt_reads = parent, in_together, set()
        try:
            for node in nodes:
                getattr(self, f"_show_{type(node).__name__}")(node)
        finally:
            self._parent, self._in_together, self._prompt_reads = saved

    def _show_Text(self, node: Any) -> None:
        from ..plan import node_reads

        if not node.source.strip():
            return
        reads = node_reads(node, self.program.environment.renderer)
        self._prompt_reads |= reads
        line = Label(f"text {preview(node.source)}", style="dim")
        if reads:
            line.append(f"  reads {', '.join(sorted(reads))}", style="dim cyan")
        self._parent.add(line)

    def _show_Slot(self, node: Any) -> None:
        if node.is_guard:
            self._guard(self._parent, node, sorted(self._prompt_reads), self._in_together)
        else:
            self._slot(self._parent, node)
        self._prompt_reads = set()

    def _show_Action(self, node: Any) -> None:
        self._action(self._parent, node)

    def _show_Instructions(self, node: Any) -> None:
        body = "".join(n.source for n in node.body if hasattr(n, "source"))
        self._parent.add(Label(f"<{node.kind}> {node.scope}, {node.mode}: {preview(body)}", style="blue"))

    def _show_Turn(self, node: Any) -> None:
        body = "".join(n.source for n in node.body if hasattr(n, "source"))
        self._parent.add(Label(f"<{node.role}> turn: {preview(body)}", style="blue"))

    def _show_Together(self, node: Any) -> None:
        label = Label("together — these slots run at the same time; they join the conversation after", style="bold")
        self._nodes(self._parent.add(label), node.body, in_together=True)

    def _show_If(self, node: Any) -> None:
        for i, branch in enumerate(node.branches):
            word = "else" if branch.condition is None else ("if" if i == 0 else "elif")
            label = word if branch.condition is None else f"{word} {branch.condition}"
            self._nodes(self._parent.add(Label(label, style="bold")), branch.body, in_together=self._in_together)

    def _slot(self, parent: Branch, slot: Any) -> None:
        plan = self.program.plans[slot]
        line = Label(f"slot {slot.key}", style="bold cyan")
        line.append(f": {slot.type_name}, {quantity(slot.quantifier)}")
        line.append(", required" if slot.required else ", may be null", style="dim")
        node = parent.add(line)
        if plan.positional:
            family = {"pick": "choices", "score": "levels"}.get(slot.type_name, "positional")
            node.add(f"{family}: {' | '.join(option_value(v) for v in plan.positional)}")
        for family, items in (("type options", plan.type_options), ("model settings", plan.settings)):
            if items:
                node.add(f"{family}: " + ", ".join(f"{k}={option_value(v)}" for k, v in items.items()))
        if plan.dynamic:
            node.add(Label("{{ … }} option values are rendered when the slot runs", style="dim"))
        self._resilience(node, slot, plan)
        self._confidence(node, plan)
        if plan.use_tools or "max_iter" in plan.control or "max_calls" in plan.control:
            self._agent(node, plan)

    def _confidence(self, node: Branch, plan: Any) -> None:
        """SPEC §27: how sure the answer is measured, and what a less sure one does."""
        asked = plan.control.get("confidence")
        if asked is None:
            return
        method = option_value(asked)
        how = ("the probability of the answer's tokens" if method == "logprobs"
               else f"the share of {method.partition(':')[2]} asks that agree" if method.startswith("vote:") else None)
        line = f"confidence={method}" + (f" ({how})" if how else "")
        floor, escalate = plan.control.get("min_confidence"), plan.control.get("escalate")
        if floor is not None and escalate is not None:
            to = ("waits for a person (escalate=approve)" if option_value(escalate) == "approve"
                  else f"is asked again of {option_value(escalate)} (escalate=)")
            line += f"; below min_confidence={option_value(floor)} the slot {to}"
        node.add(line)

    def _resilience(self, node: Branch, slot: Any, plan: Any) -> None:
        """SPEC §14: the slot's fallback, truncation and tool options, and its output cap."""
        from .. import slot_options as opts
        from ..types.builtin import TEXT_TYPES

        keys = ("fallback", "on_truncate", "tool_choice", "parallel_tools")
        given = [f"{k}={option_value(plan.control[k])}" for k in keys if k in plan.control]
        if given:
            node.add("resilience: " + ", ".join(given))
        if "max_tokens" not in plan.settings:
            is_text = plan.spec.is_text if plan.spec is not None else slot.type_name in TEXT_TYPES
            family = opts.type_family(slot.type_name, slot.quantifier, is_text)
            cap = opts.default_max_tokens(family, plan.settings.get("thinking"))
            node.add(Label(f"output cap: {cap:,} tokens per request (the default for {family} answers; "
                          "settings= or --max-tokens change it)", style="dim"))  # fmt: skip

    def _agent(self, node: Branch, plan: Any) -> None:
        c, clamped = self.ceiling, plan.limits
        requests = self._clamped(c.request_limit, clamped.request_limit, plan.control.get("max_iter"), "max_iter", "requests")
        calls = self._clamped(
            c.tool_calls_limit, clamped.tool_calls_limit, plan.control.get("max_calls"), "max_calls", "tool calls"
        )
        node.add(f"limits: {requests} · {calls} · {clamped.output_tokens_limit:,} output tokens")
        if not plan.use_tools:
            return
        self._budget(node, plan.control.get("budget"))
        approve = plan.control.get("approve")
        if not self.tools:
            node.add("tools: the ones passed at run time (--tools)")
            if approve is not None:
                node.add(Label(f"approve={option_value(approve)}: those calls wait for a person's decision", style="yellow"))
            return
        names = ", ".join(name for name, _, _ in self.tools)
        node.add(f"tools: {names}")
        if "max_iter" in plan.control:
            node.add("the last permitted request offers no tools, so the model must answer")
        waiting = self._approval(approve)
        if waiting:
            node.add(Label(f"calls of {', '.join(waiting)} wait for a person's decision (approve=, or a pause)",
                          style="yellow"))
        if not all(readonly and name not in waiting for name, _, readonly in self.tools):
            node.add(Label("waits for pending guards before it starts (not every tool is @readonly)", style="yellow"))

    @staticmethod
    def _budget(node: Branch, budget: Any) -> None:
        """The slot's `budget=`: calls each named tool may make in one run of the slot."""
        from ..syntax.nodes import JinjaValue

        if budget is None:
            return
        if isinstance(budget, JinjaValue):
            node.add(f"budget={option_value(budget)}: calls per tool, set when the slot runs")
            return
        from ..slot_options import check_option

        parsed = budget if isinstance(budget, dict) else check_option("budget", budget)  # the plan keeps the text
        caps = " · ".join(f"{name} {counted(count, 'call')}" for name, count in parsed.items())
        node.add(f"budget per tool: {caps} (budget=; the caller's tool_limits= caps them)")

    def _approval(self, approve: Any) -> list[str]:
        """The tools whose calls need approval in a slot: the host's, plus its approve=."""
        from ..slot_options import tool_names
        from ..syntax.nodes import JinjaValue

        asked: tuple[str, ...] = ()
        if approve is not None and not isinstance(approve, JinjaValue):
            asked = tool_names(approve)
        return [
            name for name, _, readonly in self.tools
            if name in self.needs_approval or name in asked or ("*" in asked and not readonly)
        ]

    @staticmethod
    def _clamped(ceiling: int | None, limit: int | None, asked: Any, option: str, unit: str) -> str:
        return limit_text(ceiling, limit, asked, option, unit, show_asked=False)

    def _guard(self, parent: Branch, slot: Any, reads: list[str], in_together: bool) -> None:
        when = self.program.plans[slot].when
        line = Label(f"guard {slot.key}", style="bold red")
        line.append(f": halts the run when triggered is {option_value(when)}")
        node = parent.add(line)
        node.add(f"judges the text above it{' (reads ' + ', '.join(reads) + ')' if reads else ''}")
        if in_together:
            node.add("starts with the block; joined before the block ends")
        else:
            node.add("starts when reached and runs beside what follows; never enters the conversation")
        node.add(Label(f"joined before: {GUARD_JOINS}", style="dim"))

    def _action(self, parent: Branch, action: Any) -> None:
        actions = self.program.environment.actions
        args = ", ".join(
            option_value(o.value) if o.key is None else f"{o.key}={option_value(o.value)}" for o in action.options
        )
        line = Label(f"action @{action.name}", style="bold green")
        if action.key:
            line.append(f" → {action.key}")
        if args:
            line.append(f"  ({args})", style="dim")
        node = parent.add(line)
        if action.name in actions and actions.get(action.name).side_effects:
            node.add(Label("side effects: pending guards are joined before it runs", style="yellow"))
