"""A read-only search (untrusted results) and a trusted write tool."""

import struckdown as sd


@sd.readonly
def search(query: str) -> str:
    """Search the web."""
    return "a page"


@sd.trusted
def post(text: str) -> str:
    """Post a message (external)."""
    return "posted"
