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
from frameworks.health_spec import (
    HealthSpec,
    HealthSpecError,
    parse_health_check,
    parse_health_spec,
)
from frameworks.ports import NotEnoughPorts, OfferPorts, ports_of, take_ports
from frameworks.scheduler import Driver, Scheduler, build_task, offer_resources
from protocol.tooling.brokers import BrokerURL
from protocol.wire.discrete import Discrete, ItemSet, Ranges
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
    OfferOperation,
    PreemptedTask,
    Preempting,
    Reason,
    Source,
    TaskGroup,
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
    "Discrete",
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
    "HealthSpec",
    "HealthSpecError",
    "ItemSet",
    "KillPolicy",
    "MasterUnreachable",
    "NotEnoughPorts",
    "Offer",
    "OfferOperation",
    "OfferPorts",
    "PreemptedTask",
    "Preempting",
    "PrincipalRemoved",
    "Ranges",
    "Reason",
    "Resources",
    "RoleRefused",
    "Scheduler",
    "SchedulerDriver",
    "Source",
    "SubscribeRefused",
    "TCPCheck",
    "TaskGroup",
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
    "parse_health_check",
    "parse_health_spec",
    "ports_of",
    "take_ports",
]
