"""struckdown 0.x in one place (SPEC §11): its calls and keyword arguments (`calls`), its
names (`names`), its per-slot `LLMConfig` (`llm_config`) and `Safe` (`safe`). The CLI's 0.x
flags and commands are in `cli/compat/`."""
