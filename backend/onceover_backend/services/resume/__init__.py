"""Resuming a failed or stalled run: its plan, one launch at a time, auto-resume, and
the stall sweep that finds runs gone silent."""
