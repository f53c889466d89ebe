"""The framework SDK: what custom frameworks are written against.

    from frameworks import Scheduler, SchedulerDriver, build_task, DriverError

A `Scheduler` is a class of callbacks; a `SchedulerDriver` runs it against a cluster.
Every error the SDK raises is a `DriverError` (`frameworks.errors`).
"""

from frameworks.calls import ENDLESS
from frameworks.driver import SchedulerDriver
from frameworks.errors import (
    BrokerRefused,
    BrokerUnreachable,
    DriverError,
    FrameworkRemoved,
    MasterUnreachable,
    PrincipalRemoved,
    RoleRefused,
    SubscribeRefused,
    TooManyFrameworks,
)
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
from protocol.wire.why import Why, WhyReason
from protocol.wire.why_codes import WhyCode

__all__ = [
    "ENDLESS",
    "BrokerRefused",
    "BrokerURL",
    "BrokerUnreachable",
    "CommandInfo",
    "ContainerInfo",
    "DriverError",
    "Executor",
    "ExecutorDriver",
    "ExecutorInfo",
    "Filters",
    "FrameworkRemoved",
    "MasterUnreachable",
    "Offer",
    "PreemptedTask",
    "Preempting",
    "PrincipalRemoved",
    "Reason",
    "Resources",
    "RoleRefused",
    "Scheduler",
    "SchedulerDriver",
    "Source",
    "SubscribeRefused",
    "TaskInfo",
    "TaskRequest",
    "TaskState",
    "TaskStatus",
    "TooManyFrameworks",
    "Why",
    "WhyCode",
    "WhyReason",
    "build_task",
    "offer_resources",
]
