"""The framework SDK: what custom frameworks are written against.

    from frameworks import Scheduler, SchedulerDriver, build_task, DriverError

A `Scheduler` is a class of callbacks; a `SchedulerDriver` runs it against a cluster (each
callback is given it as a `Driver`: the calls a framework makes).
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
from frameworks.scheduler import Driver, Scheduler, build_task, offer_resources
from protocol.tooling.brokers import BrokerURL
from protocol.wire.messages import (
    CommandCheck,
    CommandInfo,
    ContainerInfo,
    ExecutorInfo,
    Filters,
    HealthCheck,
    HealthCheckType,
    HTTPCheck,
    KillPolicy,
    Offer,
    PreemptedTask,
    Preempting,
    Reason,
    Source,
    TaskInfo,
    TaskRequest,
    TaskState,
    TaskStatus,
    TCPCheck,
)
from protocol.wire.resources import Resources
from protocol.wire.why import Why, WhyReason
from protocol.wire.why_codes import WhyCode

__all__ = [
    "ENDLESS",
    "BrokerRefused",
    "BrokerURL",
    "BrokerUnreachable",
    "CommandCheck",
    "CommandInfo",
    "ContainerInfo",
    "Driver",
    "DriverError",
    "Executor",
    "ExecutorDriver",
    "ExecutorInfo",
    "Filters",
    "FrameworkRemoved",
    "HTTPCheck",
    "HealthCheck",
    "HealthCheckType",
    "KillPolicy",
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
    "TCPCheck",
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
