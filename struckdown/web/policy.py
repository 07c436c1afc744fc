"""Which models a playground request may reach (issue 39 N1). A module of its own: the
worker process reads it from each job, and it imports nothing of the server."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class ModelPolicy:
    """Which model names a request may reach (the page's pick, and every `model=` and
    `fallback=` option of the template). Travels to the worker inside each job."""

    allowed: tuple[str, ...] = ()  # empty: edit takes any name, serve only its default
    shared: bool = False
    allow_factories: bool = False  # serve: `module:factory` names run only with --allow-factories

    def refusal(self, name: str | None) -> str | None:
        """Why `name` may not be used here (None: it may). The allow-list is a string
        comparison, done before anything is imported for the name."""
        if self.allowed:
            if name is not None and name not in self.allowed:
                return f"model {name!r} is not allowed here; allowed: {', '.join(self.allowed)}"
        elif self.shared and name is not None:
            return f"model {name!r} is not allowed here: this server uses its default model only"
        if self.shared and not self.allow_factories and name is not None and is_factory(name):
            return f"model {name!r} is a module:factory name, which this server runs only with --allow-factories"
        return None

    def to_dict(self) -> dict[str, object]:
        return {"allowed": list(self.allowed), "shared": self.shared, "allow_factories": self.allow_factories}

    @classmethod
    def from_dict(cls, data: object) -> ModelPolicy:
        if not isinstance(data, dict):
            return cls(shared=True)  # a job without a policy gets the strictest one
        return cls(tuple(data.get("allowed") or ()), bool(data.get("shared")), bool(data.get("allow_factories")))


@lru_cache(maxsize=64)
def is_factory(name: str) -> bool:
    """Whether `name` is a `package.module:factory` reference (imports nothing of it but
    the search for its module; called only for names the operator listed)."""
    if ":" not in name:
        return False
    from ..models.factory import factory_reference

    return factory_reference(name.strip()) is not None
