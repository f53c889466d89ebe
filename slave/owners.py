"""Each framework's principal, as the master named it in the framework's launches: kept
(checkpointed before its first task here runs) while the slave runs the framework's tasks
or owes their updates, and reported when the slave re-registers (`Reregister.owners`),
so that a master that lost its registry lets only that principal claim them, as Mesos
learns an orphan's FrameworkInfo from the agent."""

from __future__ import annotations

from collections.abc import Iterable

from protocol.journal import Journal


class Owners:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._of: dict[str, str] = dict(self.journal.items())

    def of(self, framework_id: str) -> str | None:
        return self._of.get(framework_id)

    async def own(self, framework_id: str, principal: str) -> None:
        """Checkpoint the framework's principal (written once a framework)."""
        if self._of.get(framework_id) != principal:
            self._of[framework_id] = principal
            await self.journal.put(framework_id, principal)

    def report(self, here: Iterable[str]) -> dict[str, str]:
        """The principals of the frameworks `here` (whose tasks the slave runs or owes
        updates for); the others' are forgotten (a framework's comes back with its next
        launch). An insecure cluster's frameworks have none to report."""
        here = set(here)
        for framework_id in [f for f in self._of if f not in here]:
            self.forget(framework_id)
        return {f: p for f in here if (p := self._of.get(f))}

    def forget(self, framework_id: str) -> None:
        if self._of.pop(framework_id, None) is not None:
            self.journal.discard(framework_id)

    async def close(self) -> None:
        await self.journal.close()
