"""The master's books as Mesos's v1 operator JSON (include/mesos/v1/master/master.proto).

What `GET_STATE`, `GET_FRAMEWORKS`, `GET_AGENTS`, `GET_TASKS`, `GET_ROLES`,
`GET_WEIGHTS` and `GET_QUOTA` answer, and the objects the operator event stream carries
(a Task, an Agent, a Framework). Read-only: nothing here changes the books. Ids,
resources and statuses are spelt by `protocol.mesos_json`, as the scheduler API spells
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from master import slave_values
from master.allocation.quota_stage import RoleStanding
from master.books import Framework, Slave, Task
from master.http.snapshot import offer_of
from master.mesos_api.json_stream import Lazy
from protocol.mesos_json import (
    JSON,
    MESOS_VERSION,
    executor_to_mesos,
    master_info,
    mesos_id,
    offer_to_mesos,
    resources_to_mesos,
    status_to_mesos,
    task_policies_to_mesos,
)
from protocol.wire.discrete import Discrete
from protocol.wire.resources import Resources

if TYPE_CHECKING:
    from master.mesos_api.master_side import MasterSide


def this_master_info(m: MasterSide) -> JSON:
    """This master's MasterInfo, its address the one it serves HTTP on."""
    host, _, port = m.web_ui().split("//")[-1].rstrip("/").rpartition(":")
    return master_info(m.info.master_id, host, int(port) if port.isdigit() else 0)


def time_info(seconds: float | None) -> JSON | None:
    """Mesos's TimeInfo: nanoseconds since the epoch."""
    return None if seconds is None else {"nanoseconds": int(seconds * 1e9)}


def _dropped_none(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if v is not None}


def task_json(task: Task, role: str) -> JSON:
    """A Task (mesos.proto): where it runs, what it holds, its state and last status."""
    status = task.status
    out: JSON = {
        "name": task.info.name or task.task_id,
        "task_id": mesos_id(task.task_id),
        "framework_id": mesos_id(task.framework_id),
        "agent_id": mesos_id(task.slave_id),
        "state": task.state.value,
        "resources": resources_to_mesos(task.resources, role, task.info.discrete),
        "statuses": [status_to_mesos(status)] if status is not None else [],
        "role": role,
        **task_policies_to_mesos(task.info),
    }
    if task.info.executor is not None:
        out["executor_id"] = mesos_id(task.info.executor.executor_id)
    if status is not None:
        out["status_update_state"] = status.state.value
    return out


def framework_info(fw: Framework) -> JSON:
    """A FrameworkInfo as its framework would have sent it."""
    return {
        "id": mesos_id(fw.framework_id),
        "name": fw.name,
        "user": "",
        "role": fw.role if fw.roles is None else "*",  # (a multi-role one's are its roles)
        "roles": fw.all_roles(),
        "principal": fw.principal,
        "failover_timeout": fw.failover_timeout,
        "capabilities": [{"type": c.value} for c in fw.capabilities()],
    }


def framework_json(m: MasterSide, fw: Framework) -> JSON:
    """GetFrameworks.Framework: allocated is what its tasks hold, offered its offers."""
    live = fw.framework_id in m.books.frameworks  # (a completed one holds nothing)
    return _dropped_none(
        {
            "framework_info": framework_info(fw),
            "active": fw.connected,
            "connected": fw.connected,
            "recovered": not fw.inbox,  # from the registry, not re-subscribed yet
            "registered_time": time_info(fw.registered_at),
            "unregistered_time": time_info(fw.removed_at),
            "offers": [_offer(m, o) for o in fw.offers if o in m.books.offers],
            "allocated_resources": [
                item for role in fw.all_roles() for item in _allocated(m, fw, role, live)
            ],
            "offered_resources": [
                item
                for role in fw.all_roles()
                for item in resources_to_mesos(
                    offered(m, _of_role(m, fw, role)),
                    role,
                    offered_values(m, _of_role(m, fw, role)),
                )
            ],
        }
    )


def _of_role(m: MasterSide, fw: Framework, role: str) -> list[str]:
    """Its offers in `role` (a framework of one role: all of them)."""
    offers = m.books.offers
    return [o for o in fw.offers if o in offers and (offers[o].role or fw.role) == role]


def _allocated(m: MasterSide, fw: Framework, role: str, live: bool) -> list[JSON]:
    """What its tasks hold in `role` (what it holds less its offers), each resource
    allocated to the role (Mesos's allocation_info)."""
    a, fid = m.allocator, fw.framework_id
    held = Resources() if not live else a.allocation(fid, role) if fw.roles else a.allocation(fid)
    tasks = [t for t in fw.tasks.values() if not t.terminal and fw.task_role(t.info) == role]
    return resources_to_mesos(
        held.subtract_clamped(offered(m, _of_role(m, fw, role))),
        role,
        Discrete.union(t.info.discrete for t in tasks),
    )


def offered(m: MasterSide, offer_ids: Iterable[str]) -> Resources:
    offers = m.books.offers
    return sum((offers[o].resources for o in offer_ids if o in offers), Resources())


def offered_values(m: MasterSide, offer_ids: Iterable[str]) -> Discrete:
    """The ports (and other values) of these offers, together (as Mesos sums them)."""
    offers = m.books.offers
    return Discrete.union(offers[o].discrete for o in offer_ids if o in offers)


def _offer(m: MasterSide, offer_id: str) -> JSON:
    record = m.books.offers[offer_id]
    fw = m.books.frameworks.get(record.framework_id)
    return offer_to_mesos(offer_of(m.books, record), record.role or (fw.role if fw else "*"))


# Mesos's default agent port. Our slaves serve no HTTP of their own; tools such as the
# `mesos` CLI read an agent's pid and port all the same (and fail on a missing key).
AGENT_PORT = 5051


def agent_pid(slave: Slave) -> str:
    """A Mesos agent's libprocess pid, `slave(1)@HOST:PORT`."""
    return f"slave(1)@{slave.hostname}:{AGENT_PORT}"


def agent_info(slave: Slave) -> JSON:
    return {
        "id": mesos_id(slave.slave_id),
        "hostname": slave.hostname,
        "port": AGENT_PORT,
        "resources": resources_to_mesos(slave.total, discrete=slave.discrete),
        "attributes": [
            {"name": k, "type": "TEXT", "text": {"value": v}}
            for k, v in sorted(slave.attributes.items())
        ],
    }


def maintenance_json(m: MasterSide, slave: Slave) -> JSON:
    """`active`, `deactivated` and (draining or drained) `drain_info`, as Mesos 1.9 says
    them of an agent an operator took out of the offers."""
    out = m.books.maintenance.get(slave.slave_id)
    fields: JSON = {"active": slave.connected and out is None, "deactivated": out is not None}
    if out is not None and out.drain is not None:
        config: JSON = {"mark_gone": out.mark_gone}
        if out.max_grace_period is not None:
            config["max_grace_period"] = {"nanoseconds": int(out.max_grace_period * 1e9)}
        fields["drain_info"] = {"state": out.drain, "config": config}
    return fields


def agent_json(m: MasterSide, slave: Slave) -> JSON:
    """GetAgents.Agent: its total, what its tasks hold, and what is offered of it."""
    offers = offered(m, slave.offers)
    in_use = slave.total.subtract_clamped(m.allocator.free(slave.slave_id)).subtract_clamped(offers)
    return {
        "agent_info": agent_info(slave),
        "pid": agent_pid(slave),
        **maintenance_json(m, slave),
        "version": MESOS_VERSION,
        "total_resources": resources_to_mesos(slave.total, discrete=slave.discrete),
        "allocated_resources": resources_to_mesos(
            in_use, discrete=slave_values.in_use(m.books, slave)
        ),
        "offered_resources": resources_to_mesos(offers, discrete=offered_values(m, slave.offers)),
        **isolation_warning(slave),
    }


def isolation_warning(slave: Slave) -> JSON:
    """Ours, beside Mesos's fields: what the agent does not enforce between tenants (a
    slave that does not switch users runs every tenant's tasks as one uid), where it
    says so; nothing where it enforces all."""
    return {"isolation_warning": slave.isolation_warning} if slave.isolation_warning else {}


def get_frameworks(m: MasterSide) -> JSON:
    return {
        "frameworks": [framework_json(m, fw) for fw in m.books.frameworks.values()],
        "completed_frameworks": [
            framework_json(m, fw) for fw in m.books.completed_frameworks.values()
        ],
    }


def get_agents(m: MasterSide) -> JSON:
    """Every agent, each built as the answer reaches it (master.mesos_api.json_stream;
    one removed by then is left out)."""
    slaves = [*m.books.slaves.values()]
    return {"agents": Lazy(agent_json(m, s) for s in slaves if m.books.slaves.get(s.slave_id) is s)}


def get_tasks(m: MasterSide) -> JSON:
    """Live tasks (and those out of reach with their slave) in `tasks`; ended ones in
    `completed_tasks`, removed frameworks' too, as Mesos lists them; each built as the
    answer reaches it, as it is then."""
    live: list[tuple[Task, str]] = []
    done: list[tuple[Task, str]] = []
    for fw in m.books.frameworks.values():
        live += [(t, fw.task_role(t.info)) for t in (*fw.tasks.values(), *fw.unreachable.values())]
        done += [(t, fw.task_role(t.info)) for t in fw.ended.values()]
    for fw in m.books.completed_frameworks.values():
        done += [(t, fw.task_role(t.info)) for t in fw.ended.values()]
    return {
        "tasks": Lazy(task_json(t, role) for t, role in live),
        "completed_tasks": Lazy(task_json(t, role) for t, role in done),
    }


def get_executors(m: MasterSide) -> JSON:
    executors = []
    for fw in m.books.frameworks.values():
        seen: set[tuple[str, str]] = set()
        for task in fw.tasks.values():
            executor = task.info.executor
            if executor is None or (task.slave_id, executor.executor_id) in seen:
                continue
            seen.add((task.slave_id, executor.executor_id))
            info = executor_to_mesos(executor, fw.framework_id)
            # as /master/state shows executors and tasks: without their command, whose
            # environment (and command line) is where a tenant keeps its secrets
            del info["command"]
            executors.append({"executor_info": info, "agent_id": mesos_id(task.slave_id)})
    return {"executors": executors}


def get_state(m: MasterSide) -> JSON:
    return {
        "get_tasks": get_tasks(m),
        "get_executors": get_executors(m),
        "get_frameworks": get_frameworks(m),
        "get_agents": get_agents(m),
    }


@dataclass(frozen=True)
class RoleHoldings:
    view: RoleStanding  # the allocator's, before the wire's RoleView
    frameworks: list[Framework]
    held: Resources  # in use and offered
    offered: Resources


def roles_held(m: MasterSide) -> list[RoleHoldings]:
    """Every role the allocator knows (pools too), with its frameworks and holdings."""
    members: dict[str, list[Framework]] = {}
    for fw in m.books.frameworks.values():
        members.setdefault(fw.role, []).append(fw)
    out = []
    for view in m.allocator.roles.views():
        fws = members.get(view.role, [])
        held = sum((m.allocator.allocation(f.framework_id) for f in fws), Resources())
        out.append(
            RoleHoldings(view, fws, held, sum((offered(m, f.offers) for f in fws), Resources()))
        )
    return out


def get_roles(m: MasterSide) -> JSON:
    roles = []
    for role in roles_held(m):
        name = role.view.role
        roles.append(
            {
                "name": name,
                "weight": role.view.weight,
                "frameworks": [mesos_id(f.framework_id) for f in role.frameworks],
                "resources": resources_to_mesos(role.held, name),
                "allocated": resources_to_mesos(role.held.subtract_clamped(role.offered), name),
                "offered": resources_to_mesos(role.offered, name),
            }
        )
    return {"roles": roles}


def get_weights(m: MasterSide) -> JSON:
    return {
        "weight_infos": [
            {"role": role, "weight": weight}
            for role, weight in sorted(
                {v.role: v.weight for v in m.allocator.roles.views()}.items()
            )
        ]
    }


def get_quota(m: MasterSide) -> JSON:
    """QuotaStatus: Mesos 1.9's `configs` (guarantees and limits by name), and the older
    `infos` (a guarantee as resources) that pre-1.9 tools read."""
    infos, configs = [], []
    for role, quota in sorted(m.allocator.quotas.items()):
        infos.append({"role": role, "guarantee": resources_to_mesos(quota.guarantee)})
        config: JSON = {"role": role}
        if quota.guarantee:
            config["guarantees"] = {k: {"value": v} for k, v in quota.guarantee.items()}
        if quota.limit is not None:
            config["limits"] = {k: {"value": v} for k, v in quota.limit.items()}
        configs.append(config)
    return {"status": {"infos": infos, "configs": configs}}
