"""A paused run, below the engine: the JSON state and its decisions (`state`), and the
state's signature and its key (`signing`). The engine's side of approval is `run/approval/`."""
