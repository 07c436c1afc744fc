"""A small MCP server for examples/library_assistant.sd: a library catalogue.

Run by struckdown over stdio (it starts the process and ends it with the run):

    sd run examples/library_assistant.sd --context examples/library_assistant.json --mcp examples/library.py

The server is named after this file, so its tools reach the template as
`library_search`, `library_details`, `library_reserve` and `library_withdraw`.
`search` and `details` are annotated read-only (a slot using only them may run beside
a pending guard), `reserve` writes, and `withdraw` is destructive (it needs a
person's approval). `python examples/library.py --http 8000` serves it over
streamable HTTP instead (then `--mcp library=http://127.0.0.1:8000/mcp`).
Needs the mcp extra: pip install 'struckdown[mcp]'.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

BOOKS = {
    "978-0141439518": {"title": "Pride and Prejudice", "author": "Jane Austen", "shelf": "fiction", "available": True},
    "978-0553418026": {"title": "The Martian", "author": "Andy Weir", "shelf": "science fiction", "available": True},
    "978-0441013593": {"title": "Dune", "author": "Frank Herbert", "shelf": "science fiction", "available": False},
    "978-0345391803": {
        "title": "The Hitchhiker's Guide to the Galaxy", "author": "Douglas Adams", "shelf": "science fiction",
        "available": True,
    },
    "978-0316769488": {"title": "The Catcher in the Rye", "author": "J. D. Salinger", "shelf": "fiction", "available": True},
}
RESERVATIONS: list[tuple[str, str]] = []

server = MCPServer("library", instructions="A library catalogue: search it, read a book's details, reserve it.")
READ_ONLY = ToolAnnotations(readOnlyHint=True)


@server.tool(annotations=READ_ONLY)
def search(query: str) -> list[dict[str, str]]:
    """Search the catalogue by words of the title, the author or the shelf (e.g. "science fiction")."""
    words = query.lower().split()
    return [
        {"isbn": isbn, "title": book["title"], "author": book["author"]}
        for isbn, book in BOOKS.items()
        if all(w in f"{book['title']} {book['author']} {book['shelf']}".lower() for w in words)
    ]


@server.tool(annotations=READ_ONLY)
def details(isbn: str) -> dict[str, object]:
    """Everything the catalogue knows about a book, including whether it is on the shelf."""
    if isbn not in BOOKS:
        raise ToolError(f"no book with ISBN {isbn}")
    return {"isbn": isbn, **BOOKS[isbn]}


@server.tool()
def reserve(isbn: str, reader: str) -> str:
    """Reserve an available book for a reader."""
    book = BOOKS.get(isbn)
    if book is None:
        raise ToolError(f"no book with ISBN {isbn}")
    if not book["available"]:
        raise ToolError(f"{book['title']} is out on loan")
    book["available"] = False
    RESERVATIONS.append((isbn, reader))
    return f"reserved {book['title']} for {reader}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def withdraw(isbn: str) -> str:
    """Remove a book from the catalogue for good."""
    book = BOOKS.pop(isbn, None)
    if book is None:
        raise ToolError(f"no book with ISBN {isbn}")
    return f"withdrew {book['title']}"


if __name__ == "__main__":
    if "--http" in sys.argv:
        server.run("streamable-http", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        server.run()
