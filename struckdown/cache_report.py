"""The old path of `struckdown.explain.cache` (docs/performance.md named it): a re-export."""

from .explain.cache import CacheReport, SlotCache, cache_report, pricer, report_lines

__all__ = ["CacheReport", "SlotCache", "cache_report", "pricer", "report_lines"]
