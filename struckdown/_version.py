"""struckdown's version, on its own: the modules that record or print it read it here,
not from the package's `__init__` (which imports nothing at start-up)."""

__version__ = "0.1.0"
