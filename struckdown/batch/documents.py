"""Text and document inputs of `sd batch`, as 0.18 read them: one row per file with
`input` and `content` (the text), `source` (the path or URL), `filename` (the path
as given or matched by the glob, `data/a.txt`) and `basename` (the name without its
suffix, `a`). PDF and DOCX files give their text through
pypdf and python-docx (the `docs` extra, imported only when such a file is read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fileio import read_text

DOCUMENT_SUFFIXES = frozenset({".pdf", ".docx"})


def text_row(text: str, source: str, name: str) -> dict[str, Any]:
    stem = name.rsplit(".", 1)[0] if "." in name.lstrip(".") else name
    return {"input": text, "content": text, "source": source, "filename": name, "basename": stem}


def file_row(path: Path, source: str | None = None) -> dict[str, Any]:
    """The row of a text or document file."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        text = _pdf_text(path)
    elif suffix == ".docx":
        text = _docx_text(path)
    else:
        text = read_text(path, "input")
    row = text_row(text, source or str(path), path.name)
    row["filename"] = str(path)  # as 0.18: the path as given or matched (`data/a.txt`); basename is the stem
    return row


def _pdf_text(path: Path) -> str:
    try:
        from pypdf import PdfReader
    except ImportError:
        raise InputError(f"input {path}: reading PDF files needs pypdf: pip install 'struckdown[docs]'") from None
    try:
        reader = PdfReader(str(path))
        return "\n\n".join((page.extract_text() or "").strip() for page in reader.pages).strip()
    except Exception as exc:  # noqa: BLE001 - any damage in the file is an input error naming it
        raise InputError(f"cannot read PDF input {path}: {type(exc).__name__}: {exc}") from None


def _docx_text(path: Path) -> str:
    try:
        import docx
    except ImportError:
        raise InputError(f"input {path}: reading DOCX files needs python-docx: pip install 'struckdown[docs]'") from None
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # noqa: BLE001 - any damage in the file is an input error naming it
        raise InputError(f"cannot read DOCX input {path}: {type(exc).__name__}: {exc}") from None
    return "\n\n".join(p.text for p in document.paragraphs if p.text.strip())
