"""Triggers: agent work started by a schedule, a webhook call, Seed activity or a run's end."""
