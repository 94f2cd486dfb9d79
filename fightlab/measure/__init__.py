"""Measurement: everything that times, profiles, checks and compares, and writes result rows."""
