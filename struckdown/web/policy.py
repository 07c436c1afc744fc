"""Which models, files and code a playground request may reach (issue 39 N1, SPEC §30).
The policy is the core's `HostPolicy` (struckdown/authority.py): the worker process sets it
on its Environment from each job, and every marked option is checked against it."""

from __future__ import annotations

from ..authority import HostPolicy, is_factory

#: The playground's name for it (the page's pick, and every marked option of the template).
ModelPolicy = HostPolicy

__all__ = ["HostPolicy", "ModelPolicy", "is_factory"]
