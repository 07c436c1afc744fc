"""struckdown.run.wrappers"""
