"""One write tool that may take the private ssn, and a trusted clock."""

import struckdown as sd


@sd.trusted
@sd.receives("ssn")
def file_claim(ssn: str) -> str:
    """File a claim."""
    return "filed"


@sd.trusted
@sd.readonly
def clock() -> str:
    """The time."""
    return "noon"
