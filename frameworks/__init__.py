"""The framework SDK: what custom frameworks are written against.

from frameworks import Executor, ExecutorDriver, TaskInfo, TaskState, TaskStatus
"""

from frameworks.calls import ENDLESS, DriverError
from frameworks.driver import SchedulerDriver
from frameworks.executor import Executor, ExecutorDriver
from frameworks.scheduler import Scheduler, build_task, offer_resources
from protocol.tooling.brokers import BrokerURL
from protocol.wire.messages import (
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    Filters,
    Offer,
    PreemptedTask,
    Preempting,
    Reason,
    Source,
    TaskInfo,
    TaskRequest,
    TaskState,
    TaskStatus,
)
from protocol.wire.resources import Resources

__all__ = [
    "ENDLESS",
    "BrokerURL",
    "CommandInfo",
    "ContainerInfo",
    "DriverError",
    "Executor",
    "ExecutorDriver",
    "ExecutorInfo",
    "Filters",
    "Offer",
    "PreemptedTask",
    "Preempting",
    "Reason",
    "Resources",
    "Scheduler",
    "SchedulerDriver",
    "Source",
    "TaskInfo",
    "TaskRequest",
    "TaskState",
    "TaskStatus",
    "build_task",
    "offer_resources",
]
