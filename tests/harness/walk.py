"""Following a piece of data through the code, as the issue's "farm-studio walk" does by
hand: which modules (rooms) it passes through, in order, and how often it climbs back into
one it had left.

What is followed is a set of objects, by identity: a spec and every pydantic model inside
it (`models_in`: its master, cluster, run, each framework, their quotas and durations).
Plain values read out of them (a policy's name, a number) are not followed: they are the
stage's own by then. A module holds the data while one of its frames has one of those
objects as a local variable (an argument, or a name bound in its body; `self.spec` read
through `self` does not count). As a reader walks the code, each function is followed
once: the walk records a module when a function holding the data is entered for the first
time, and when such a first call returns to a caller holding it too; consecutive steps
in one module are one stay. A re-entry is a step into a module the walk had left before;
a climb, one made by a return (the data climbing back up to a caller).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent.parent
OURS = tuple(str(ROOT / package) + "/" for package in ("cluster", "master", "protocol"))


def models_in(model: BaseModel) -> set[int]:
    """The ids of `model` and every model, list and dict of models inside it."""
    seen: set[int] = set()

    def visit(value: object) -> None:
        if isinstance(value, BaseModel):
            seen.add(id(value))
            for name in type(value).model_fields:
                visit(getattr(value, name))
        elif isinstance(value, list | tuple):
            if any(isinstance(v, BaseModel) for v in value):
                seen.add(id(value))
            for v in value:
                visit(v)
        elif isinstance(value, dict):
            if any(isinstance(v, BaseModel) for v in value.values()):
                seen.add(id(value))
            for v in value.values():
                visit(v)

    visit(model)
    return seen


def module_of(frame: FrameType) -> str:
    return str(Path(frame.f_code.co_filename).relative_to(ROOT))


class Walk:
    def __init__(self, followed: set[int]) -> None:
        self.followed = followed
        self.steps: list[str] = []  # modules, in order, consecutive repeats folded
        self.returns: set[int] = set()  # the steps made by a return to a caller
        self._walked: set[CodeType] = set()  # functions followed already

    def _holds(self, frame: FrameType) -> bool:
        followed = self.followed
        return any(id(v) in followed for v in frame.f_locals.values())

    def _step(self, frame: FrameType, returned: bool = False) -> None:
        module = module_of(frame)
        if not self.steps or self.steps[-1] != module:
            if returned:
                self.returns.add(len(self.steps))
            self.steps.append(module)

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event != "call" or code in self._walked or not code.co_filename.startswith(OURS):
            return None
        if self._holds(frame):
            self._walked.add(code)
            self._step(frame)
            return self._on_return  # (only first calls holding the data are watched further)
        return None

    def _on_return(self, frame: FrameType, event: str, arg: Any) -> Any:
        caller = frame.f_back
        if event != "return" or caller is None:
            return self._on_return
        if caller.f_code.co_filename.startswith(OURS) and self._holds(caller):
            self._step(caller, returned=True)
        return self._on_return

    def run(self, work: Callable[[], object]) -> None:
        before = sys.gettrace()
        sys.settrace(self._trace)
        try:
            work()
        finally:
            sys.settrace(before)

    @property
    def rooms(self) -> set[str]:
        return set(self.steps)

    def climbs(self) -> list[tuple[int, str]]:
        """Each return (its index in `steps`) into a module the walk had left before."""
        seen: set[str] = set()
        out = []
        for i, module in enumerate(self.steps):
            if module in seen and i in self.returns:
                out.append((i, module))
            seen.add(module)
        return out

    def reentries(self) -> list[tuple[int, str]]:
        """Each step (its index in `steps`) into a module the walk had left before, by a
        return or by a call."""
        seen: set[str] = set()
        out = []
        for i, module in enumerate(self.steps):
            if module in seen:
                out.append((i, module))
            seen.add(module)
        return out


def walk(data: BaseModel, work: Callable[[], object], also: Iterable[int] = ()) -> Walk:
    """Run `work`, following `data` (and the objects of `also`) through it."""
    w = Walk(models_in(data) | set(also))
    w.run(work)
    return w
