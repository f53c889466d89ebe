"""Small schedulers that hold a cluster in a known shape: one that answers no offer, one
that declines each with a filter, one that fills slaves with long tasks."""

from __future__ import annotations

from frameworks import Filters, Offer, Scheduler, SchedulerDriver, build_task


class Ignores(Scheduler):
    """Holds every offer and answers none."""


class Declines(Scheduler):
    """Declines every offer, filtering it for `refuse` seconds."""

    def __init__(self, refuse: float) -> None:
        self.refuse = refuse

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        driver.decline_offers([o.offer_id for o in offers], Filters(refuse_seconds=self.refuse))


class Fills(Scheduler):
    """Runs one long task filling each slave it is offered, up to `most`; declines the rest
    (a short filter: others may have them)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.launched = 0

    async def resource_offers(self, driver: SchedulerDriver, offers: list[Offer]) -> None:
        for o in offers:
            if self.launched < self.most:
                self.launched += 1
                task = build_task(o, f"t{self.launched}", o.resources, command="sleep 600")
                driver.launch_tasks([o.offer_id], [task])
            else:
                driver.decline_offer(o.offer_id, Filters(refuse_seconds=0.2))
