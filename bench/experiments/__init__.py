"""One-off reproductions of the profile findings in docs/performance.md.

Each module monkeypatches struckdown internals to try a recommended fix, toggled per
trial, and times stock vs fixed vs bare pydantic-ai side by side. They depend on
private names (`struckdown.run.slot._text_output`, `shared_agent`, ...) and are
expected to stop working once the fixes land or the internals move; they are not
part of `python -m bench`.
"""
