"""`python -m struckdown.cli` is `sd`."""

from . import main

main()
