"""Imported once by the workers' fork server: every worker forked from it starts warm."""

from .worker import _warm_up

_warm_up()
