"""The framework SDK: what custom frameworks are written against.

from frameworks import Executor, ExecutorDriver, TaskInfo, TaskState, TaskStatus
"""

from frameworks.executor import Executor, ExecutorDriver
from protocol.messages import (
    CommandInfo,
    ExecutorInfo,
    Filters,
    Offer,
    Reason,
    TaskInfo,
    TaskState,
    TaskStatus,
)
from protocol.resources import Resources

__all__ = [
    "CommandInfo",
    "Executor",
    "ExecutorDriver",
    "ExecutorInfo",
    "Filters",
    "Offer",
    "Reason",
    "Resources",
    "TaskInfo",
    "TaskState",
    "TaskStatus",
]
