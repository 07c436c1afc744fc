"""The engine's side of approval (SPEC §12, §27): a slot's tool calls that need a person's
decision (`calls`) and an answer escalated to one (`answers`). The paused state itself is
`struckdown/approval/`."""
