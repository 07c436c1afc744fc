"""Read-only, trusted tools only: no external sink, no untrusted results."""

import struckdown as sd


@sd.trusted
@sd.readonly
def clock() -> str:
    """The time."""
    return "noon"
