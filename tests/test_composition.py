"""The master is composed, not inherited (#29): its call handlers are collaborators built
with the shell and what else they need, so no class in `master/` takes behaviour from
another class of ours. Records and models may share a base (data, no behaviour), errors
an exception family, and interfaces are `Protocol`s."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pydantic

import master

OURS = ("master", "protocol", "slave", "frameworks", "cluster")


def _classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(master.__path__, "master."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                found.append(cls)
    return found


def _behaviour_base(base: type) -> bool:
    if base.__module__.split(".")[0] not in OURS:
        return False
    if issubclass(base, (BaseException, pydantic.BaseModel)):
        return False  # an exception family, or a record's shared model config
    return not getattr(base, "_is_protocol", False)


def test_no_master_class_inherits_behaviour_from_ours() -> None:
    classes = _classes()
    assert any(cls.__name__ == "Master" for cls in classes)
    inherited = [
        f"{cls.__module__}.{cls.__name__}({base.__name__})"
        for cls in classes
        for base in cls.__bases__
        if _behaviour_base(base)
    ]
    assert inherited == []
