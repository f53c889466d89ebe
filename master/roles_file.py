"""The roles file (`drfmesos master --roles FILE`): the role tree's weights, quotas and the
ordering of each pool's children, in YAML, checked by a pydantic model (its JSON schema:
`drfmesos roles schema`).

    roles:
      eng:         {weight: 3, ordering: drf, quota: {guarantee: {cpus: 4}, limit: {cpus: 10}}}
      eng/backend: {weight: 1}
      eng/batch:   {weight: 1, ordering: fifo}
      ops:         {weight: 1, quota: {limit: {cpus: 2, mem: 4096}}}

Roles are named by their paths, so the tree cannot have a cycle; a role named twice is
refused (YAML itself would silently keep the last), and so are wildcards, empty segments,
weights that are not positive, a guarantee over its limit and an unknown ordering -- each
with the field named.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from master.allocation.quota import Quota, QuotaError
from master.allocation.role_tree import check_role
from protocol.wire.codec import describe_validation
from protocol.wire.reservations import is_plain
from protocol.wire.resources import Limit, ResourceError, Resources
from protocol.wire.values import MAX_WEIGHT

DEFAULT_ROLE = "*"
NO_DEFAULT_QUOTA = "the default role * has no quota, as in Mesos (MESOS-3938): give it a role"


class RolesError(ValueError):
    """A roles file that cannot be used; the message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaSpec(_Strict):
    guarantee: Resources = Field(default_factory=Resources)
    limit: Limit | None = None  # zeros kept: `cpus: 0` freezes the role's cpus

    @model_validator(mode="after")
    def _guarantee_within_limit(self) -> QuotaSpec:
        for named in (self.guarantee, self.limit or Limit()):
            if reserved := sorted(k for k in named.millis if not is_plain(k)):
                raise ValueError(
                    f"a quota names resources by what they are (cpus, mem, ...), not "
                    f"reserved ones or volumes: {reserved[0]} (as Mesos refuses them)"
                )
        try:
            self.guarantee.check_spelling()
            if self.limit is not None:
                self.limit.check_spelling()
            self.quota()
        except (QuotaError, ResourceError) as e:
            raise ValueError(str(e)) from None
        return self

    def quota(self) -> Quota:
        return Quota(self.guarantee, self.limit)


class RoleSpec(_Strict):
    weight: float = Field(default=1.0, gt=0, le=MAX_WEIGHT)
    ordering: Literal["drf", "fair", "fifo"] = "drf"
    quota: QuotaSpec | None = None


class RolesFile(_Strict):
    roles: dict[str, RoleSpec] = Field(default_factory=dict)

    @field_validator("roles")
    @classmethod
    def _names(cls, roles: dict[str, RoleSpec]) -> dict[str, RoleSpec]:
        for name, spec in roles.items():
            check_role(name)
            if name == DEFAULT_ROLE and spec.quota is not None:
                raise ValueError(NO_DEFAULT_QUOTA)
        return roles


class _UniqueKeys(yaml.SafeLoader):
    """A YAML loader that refuses a mapping key given twice."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise RolesError(f"line {key_node.start_mark.line + 1}: {key!r} is given twice")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def parse_roles(text: str, where: str = "roles file") -> RolesFile:
    try:
        raw = yaml.load(text, Loader=_UniqueKeys)
    except yaml.YAMLError as e:
        raise RolesError(f"{where}: not YAML: {e}") from None
    try:
        return RolesFile.model_validate(raw if raw is not None else {})
    except ValidationError as e:
        raise RolesError(f"{where}: {describe_validation(e, RolesFile)}") from None


def load_roles(path: Path) -> RolesFile:
    try:
        text = path.read_text()
    except OSError as e:
        raise RolesError(f"cannot read {path}: {e}") from None
    return parse_roles(text, str(path))


def dump_roles(roles: RolesFile) -> str:
    return yaml.safe_dump(roles.model_dump(mode="json", exclude_defaults=True), sort_keys=True)


def save_roles(path: Path, roles: RolesFile) -> None:
    """Write the roles file whole, atomically (a reader never sees half of it)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dump_roles(roles))
    tmp.replace(path)


class RolesFileKeeper:
    """The roles file as the master keeps it: written whole after each change operators
    make at run time. The master reads it once, at its start, so an edit by hand while it
    runs is not applied; the next write had erased it without a word (newcomer91). Now
    what the file holds then, if it is not what the master last read or wrote there, is
    kept beside it first (`<name>.edited-<UTC time>`), for its writer to see."""

    def __init__(self, path: Path, loaded: RolesFile) -> None:
        self.path = path
        self.on_disk = loaded.model_copy(deep=True)  # (what the file holds, as the master knows)

    def save(self, roles: RolesFile) -> Path | None:
        """Write `roles`; where an edit made meanwhile is kept, if there was one. (Blocking:
        in a thread.)"""
        aside = None
        try:
            text = self.path.read_text()
        except OSError:
            text = None  # (gone: nothing to keep)
        if text is not None and self._edited(text):
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            aside = self.path.with_name(f"{self.path.name}.edited-{stamp}")
            aside.write_text(text)
        save_roles(self.path, roles)
        self.on_disk = roles.model_copy(deep=True)
        return aside

    def _edited(self, text: str) -> bool:
        try:
            return parse_roles(text, str(self.path)) != self.on_disk
        except RolesError:
            return True  # (an edit that does not even parse is kept too)


def schema() -> dict[str, Any]:
    return RolesFile.model_json_schema()
