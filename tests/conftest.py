import pathlib
import sys

# Shared test helpers (scripted models, CLI runners, payload lists) live in tests/support.
sys.path.insert(0, str(pathlib.Path(__file__).parent / "support"))
