"""`sd batch --provider-batch`: the journal, progress and summary of a provider-batched job.

When a batch is created, every row with a request in it gets a journal line
`{"index", "ok": false, "provider_batch": {request key: {"batch", "custom_id"}}, …}`
(one fsync for the batch). A finished row's line replaces it (the last line for an index
wins); a row that failed or halted keeps its `provider_batch` records, so `--resume`
collects its batch requests instead of submitting them again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..wording import counted
from .errors import EXIT_ERROR, CliError

if TYPE_CHECKING:
    from ..batch.journal import Journal
    from ..batch.provider import BatchCounts, ProviderBatch, RowRecords


class ProviderBatchJob:
    """The CLI side of one provider-batched `sd batch` run (rows by journal index; the
    ProviderBatch sees rows by their position among the rows this run runs)."""

    def __init__(
        self,
        journal: Journal | None,
        pending: Sequence[int],
        input_hashes: Sequence[str],
        template_hash: str,
        console: Any,
        *,
        resume: bool,
        batch_size: int | None,
        batch_wait: float | None,
    ) -> None:
        from ..batch.provider import DEFAULT_MAX_WAIT, ProviderBatch

        self.journal = journal
        self.pending = pending
        self.input_hashes = input_hashes
        self.template_hash = template_hash
        self.console = console
        self.progress: Any = None
        waiting = _waiting(journal.path, input_hashes, template_hash) if journal is not None and resume else {}
        records = {position: waiting[index] for position, index in enumerate(self.pending) if index in waiting}
        if records:
            requests = sum(len(r) for r in records.values())
            console.file.write(
                f"{counted(len(records), 'row')} {'has' if len(records) == 1 else 'have'} {counted(requests, 'request')} "
                "in provider batches of the earlier run: "
                "waiting for those batches, not submitting them again\n"
            )
        self.batch: ProviderBatch = ProviderBatch(
            max_requests=batch_size,
            max_wait=DEFAULT_MAX_WAIT if batch_wait is None else (batch_wait or None),
            records=records,
            on_record=self._record if journal is not None else None,
            on_progress=self._progress,
        )

    def _record(self, changed: dict[int, RowRecords]) -> None:
        assert self.journal is not None
        entries = []
        for position, records in changed.items():
            index = self.pending[position]
            entries.append({
                "index": index, "ok": False, "answers": {}, "error": None, "usage": {}, "halted": None,
                "provider_batch": records, "input_hash": self.input_hashes[index], "template_hash": self.template_hash,
            })  # fmt: skip
        try:
            self.journal.record_many(entries)
        except OSError as exc:
            raise CliError(f"cannot write journal {self.journal.path}: {exc}", code=EXIT_ERROR) from None

    def annotate(self, position: int, entry: dict[str, Any]) -> None:
        """A finished row's journal line: one that failed or halted keeps its batch requests."""
        records = self.batch.records_of(position)
        if records and not entry.get("ok"):
            entry["provider_batch"] = records

    def _progress(self, counts: BatchCounts) -> None:
        if self.progress is not None:
            self.progress.note(progress_line(counts))

    def summary(self) -> str:
        counts = self.batch.counts
        line = f"provider batches: {counts.submitted} submitted"
        if counts.submitted:
            line += f" ({counts.requests_per_batch:.1f} requests each)"
        if counts.resumed:
            line += f", {counts.resumed} from the earlier run ({counted(counts.continued, 'request')} collected, not sent again)"
        if counts.pending:
            line += f", {counts.pending} pending"
        if counts.cost is not None and counts.list_cost is not None:
            line += f" · ${counts.cost:.4f} at batch prices (${counts.list_cost:.4f} at list prices)"
        return line


def progress_line(counts: BatchCounts) -> str:
    return (
        f"provider batches: {counts.submitted + counts.resumed} submitted, {counts.pending} pending, "
        f"{counts.done} done · {counted(counts.rows_done, 'row')} done"
    )


def _waiting(path: Path, input_hashes: Sequence[str], template_hash: str) -> dict[int, RowRecords]:
    """Rows the journal holds as not done with requests in provider batches, for the same
    input and job (read line by line: only those rows' records are kept)."""
    import json

    waiting: dict[int, RowRecords] = {}
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        return waiting
    except OSError as exc:
        raise CliError(f"cannot read journal {path}: {exc}") from None
    with handle:
        for line in handle:
            try:
                entry = json.loads(line)
                index = int(entry["index"])
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable line (a crash cut it short) is not a row's last word
            if (
                not entry.get("ok")
                and isinstance(entry.get("provider_batch"), dict)
                and 0 <= index < len(input_hashes)
                and entry.get("input_hash") == input_hashes[index]
                and entry.get("template_hash") == template_hash
            ):
                waiting[index] = entry["provider_batch"]
            else:  # the last line for an index wins
                waiting.pop(index, None)
    return waiting


def check_flags(provider_batch: bool, batch_wait: float | None, batch_size: int | None, engine: str) -> None:
    if not provider_batch:
        for flag, value in (("--batch-wait", batch_wait), ("--batch-size", batch_size)):
            if value is not None:
                raise CliError(f"{flag} is for --provider-batch")
        return
    if engine != "local":
        raise CliError(
            "--provider-batch runs the rows in this process (the provider runs the batch): "
            "it cannot be combined with --engine dask"
        )
