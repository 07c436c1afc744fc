"""struckdown.tools"""
