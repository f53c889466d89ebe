"""What the task-group tests launch: a group's default executor's own resources, a
task's, and filters that keep what a launch leaves from being offered back to it."""

from __future__ import annotations

from protocol.wire.messages import Filters
from protocol.wire.resources import Resources

EXECUTOR = Resources(cpus=0.1, mem=32)  # the default executor's own
TASK = Resources(cpus=0.25, mem=32)
KEEP_OUT = Filters(refuse_seconds=3600)  # what a launch leaves is not offered back to it
