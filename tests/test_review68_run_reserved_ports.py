"""Review 68: `drfmesos run --role svc --ports 1` never launches on ports reserved for
its role.

The ports how-to: "Ports reserved for a role count as naming ports: a slave given
`ports(svc):[8000-8010]` alone offers no others ... a task given reserved ports finds
them in `$PORT0`, ... as any others", and the run how-to: "`--ports N`: Give each
instance N ports of its own, out of its offer". The slave does read reserved ports as
ports (`discrete.environment` takes them `whoever`'s), but the SDK's `OfferPorts` (and
`take_ports`, `ports_of`) reads only `offer.discrete["ports"]`: an offer holding 11 ports
of `ports(svc)` has "0 free", so `JobScheduler` declines every offer and the run waits
for ever (and examples/web_service.py, which takes its ports the same way, likewise).
"""

from __future__ import annotations

from frameworks.job import JobScheduler, JobSpec
from frameworks.ports import ports_of, take_ports
from protocol.wire.discrete import Discrete, parse_resources
from protocol.wire.messages import Offer, TaskInfo
from protocol.wire.resources import Resources


class Recorder:
    """The driver calls JobScheduler makes on offers."""

    def __init__(self) -> None:
        self.launched: list[TaskInfo] = []
        self.declined: list[str] = []

    def launch_tasks(self, offer_ids: list[str], tasks: list[TaskInfo]) -> None:
        self.launched += tasks

    def decline_offer(self, offer_id: str) -> None:
        self.declined.append(offer_id)

    def suppress_offers(self) -> None:
        pass


def svc_offer() -> Offer:
    resources, values = parse_resources("cpus:2;mem:512;ports(svc):[8000-8010]")
    return Offer(
        offer_id="o1",
        framework_id="f1",
        slave_id="s1",
        hostname="s1",
        resources=resources,
        discrete=values,
        role="svc",
    )


async def test_run_takes_its_ports_from_those_reserved_for_its_role() -> None:
    spec = JobSpec(name="run", command="serve", resources=Resources(cpus=1, mem=64), ports=1)
    job = JobScheduler(spec, echo=lambda _: None)
    driver = Recorder()
    await job.resource_offers(driver, [svc_offer()])  # type: ignore[arg-type]
    assert driver.launched, f"an offer of ports(svc):[8000-8010] declined: {driver.declined}"
    [task] = driver.launched
    assert task.discrete.whoever("ports") is not None


def test_take_ports_hands_out_reserved_ports() -> None:
    taken = take_ports(svc_offer(), 2)
    assert isinstance(taken, Discrete)
    assert ports_of(taken) == [8000, 8001]
