"""Our code is composed, not inherited (#29): the master's call handlers are collaborators
built with the shell and what else they need; the slave's custom executors
(`ExecutorSide`) and an image task's launch (`ImageLaunch`) are collaborators it builds;
the brokers we start share a `Listener`, not a base. So no class in `master/`, `slave/`,
`protocol/`, `frameworks/` or `cluster/` takes behaviour from another class of ours but
the bases meant for it (`MEANT`). Records and models may share a base (data, no
behaviour), errors an exception family, and interfaces are `Protocol`s."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pydantic
import pytest

import cluster
import frameworks
import master
import protocol
import slave

OURS = ("master", "protocol", "slave", "frameworks", "cluster")


def _classes(package: object) -> list[type]:
    found = []
    name = package.__name__  # type: ignore[attr-defined]
    for info in pkgutil.walk_packages(package.__path__, name + "."):  # type: ignore[attr-defined]
        if info.name.endswith(".__main__"):
            continue  # (`python -m cluster`: importing it runs the command)
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                found.append(cls)
    return found


# bases meant to be specialised: an immutable value type (a quota `Limit` is the resource
# vector that keeps its zeros), and the SDK's callbacks that a framework's author
# subclasses, as with pymesos (the samples are such frameworks)
MEANT = (
    "protocol.wire.resources.Resources",
    "frameworks.scheduler.Scheduler",
    "frameworks.executor.Executor",
)


def _behaviour_base(base: type) -> bool:
    if base.__module__.split(".")[0] not in OURS:
        return False
    if f"{base.__module__}.{base.__name__}" in MEANT:
        return False
    if issubclass(base, (BaseException, pydantic.BaseModel)):
        return False  # an exception family, or a record's shared model config
    return not getattr(base, "_is_protocol", False)


@pytest.mark.parametrize(
    ("package", "root"),
    [
        (master, "Master"),
        (slave, "Slave"),
        (protocol, "Bus"),
        (frameworks, "SchedulerDriver"),
        (cluster, "Launcher"),
    ],
)
def test_no_class_inherits_behaviour_from_ours(package: object, root: str) -> None:
    classes = _classes(package)
    assert any(cls.__name__ == root for cls in classes)
    inherited = [
        f"{cls.__module__}.{cls.__name__}({base.__name__})"
        for cls in classes
        for base in cls.__bases__
        if _behaviour_base(base)
    ]
    assert inherited == []
