"""`LLMConfig`: struckdown 0.x's per-slot model settings, and a 0.x YAML type's `llm_config:`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class LLMConfig(BaseModel):
    """0.x's per-slot model settings (a slot's options, a YAML type's `llm_config:`)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    model: str | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = Field(default=None, ge=0)
    thinking: Literal["off", "minimal", "low", "medium", "high", "xhigh"] | bool | None = None

    def settings(self) -> dict[str, Any]:
        """The pydantic-ai model settings these stand for (`model` is not a setting)."""
        out = self.model_dump(exclude_none=True, exclude={"model"})
        if out.get("thinking") == "off":
            out["thinking"] = False
        return out
