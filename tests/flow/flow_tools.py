"""The tools of the flow corpus (loaded by `sd check --tools`)."""

import struckdown as sd


def send_email(to: str, body: str) -> str:
    """Send an email (a write tool: an external sink)."""
    return "sent"


@sd.receives("ssn")
def file_claim(ssn: str) -> str:
    """File a claim (a write tool that may take the private ssn)."""
    return "filed"


@sd.trusted
@sd.readonly
def clock() -> str:
    """The time (read-only, trusted)."""
    return "noon"
