"""Experiments read back: the statistics and the report over outcome records (issue 50)."""
