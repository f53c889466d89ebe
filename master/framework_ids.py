"""Framework ids the master makes, each carrying proof of the principal it was given to.

On a secured cluster a new framework does not choose its id: the master makes one,
`fw-<random>-<tag>`, whose tag is an HMAC-SHA256 (stdlib `hmac`) of the principal and the
random part under a key the cluster keeps beside its credentials store
(`framework-ids.key`, made by `drfmesos auth init`, or by the first master that needs it in
an older store). Any master with that store
can then tell, without books, whether an id was given to the principal presenting it: a
master restarted without `--work-dir` lets a framework re-subscribe with its own id and
refuses every other principal that names it. A tenant cannot make an id that passes, and
an id of another's is no use to it.

A task launched on a secured cluster carries a proof of the same kind, of its framework,
its id and its slave (`task_proof`), which its slave keeps and shows when it registers
again: a new leader, which knows no task until the slaves bring them back, books a task
only on the slave it was launched on, whichever slave names it first.

Without a credentials store (an insecure cluster) nothing proves who anyone is: ids are
random, unsigned, and a framework may re-subscribe with any id the master does not know
(as Mesos without authentication).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from protocol import logs
from protocol.tooling.credentials import FRAMEWORK_IDS_KEY

KEY_FILE = FRAMEWORK_IDS_KEY  # in the credentials store's directory (made by `auth init`)
KEY_BYTES = 32
RANDOM_HEX = 16  # hex digits of an id's random part (64 bits: unique, not secret)
TAG_HEX = 32  # hex digits of its tag (128 bits of HMAC-SHA256)
PREFIX = "fw-"

log = logs.get("framework_ids")


class FrameworkIds:
    """Makes framework ids and checks whose they are (`key` None: an insecure cluster)."""

    def __init__(self, key: bytes | None) -> None:
        self.key = key

    @classmethod
    def of_store(cls, principals: Path | None) -> FrameworkIds:
        """The ids of the cluster whose credentials store holds `principals` (its
        principals.json); unsigned without one."""
        return cls(None if principals is None else cluster_key(principals.parent / KEY_FILE))

    @property
    def signed(self) -> bool:
        return self.key is not None

    def new(self, principal: str) -> str:
        """A new framework's id, given to `principal`."""
        random = secrets.token_hex(RANDOM_HEX // 2)
        if self.key is None:
            return f"{PREFIX}{random}"
        return f"{PREFIX}{random}-{self._tag(principal, random)}"

    def given_to(self, framework_id: str, principal: str) -> bool:
        """Whether this cluster gave `framework_id` to `principal` (on an insecure
        cluster, any id may be anyone's: True)."""
        if self.key is None:
            return True
        random, _, tag = framework_id.removeprefix(PREFIX).partition("-")
        if not framework_id.startswith(PREFIX) or len(tag) != TAG_HEX:
            return False
        return hmac.compare_digest(tag, self._tag(principal, random))

    def task_proof(self, framework_id: str, task_id: str, slave_id: str) -> str:
        """The proof that this cluster launched the task on the slave ("" on an insecure
        cluster): the slave keeps it with the task and shows it when it registers again,
        so that after a failover a slave books only its own tasks, not another's."""
        if self.key is None:
            return ""
        message = f"task\0{framework_id}\0{task_id}\0{slave_id}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()[:TAG_HEX]

    def launched(self, proof: str, framework_id: str, task_id: str, slave_id: str) -> bool:
        """Whether `proof` is this cluster's for the task on the slave (always, insecure)."""
        if self.key is None:
            return True
        return hmac.compare_digest(proof, self.task_proof(framework_id, task_id, slave_id))

    def _tag(self, principal: str, random: str) -> str:
        assert self.key is not None
        # (the principal's name holds no NUL: it cannot run into the random part)
        message = f"{principal}\0{random}".encode()
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()[:TAG_HEX]


def cluster_key(path: Path) -> bytes:
    """The key in `path`, made there first if there is none (by whichever master gets
    there first: written aside, then linked into place, so no master reads half a key).
    A store this master cannot write to gets a key of this process only: said, since ids
    then do not outlive it."""
    with contextlib.suppress(FileNotFoundError):
        return _read_key(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(KEY_BYTES) + "\n")
        with contextlib.suppress(FileExistsError):  # (another master made it meanwhile)
            os.link(tmp, path)
        log.info("framework_ids.key_made", path=str(path))
        return _read_key(path)
    except OSError as e:
        log.warning(
            "framework_ids.key_not_kept",
            path=str(path),
            error=str(e),
            detail="framework ids this master gives will not be recognised by another",
        )
        return secrets.token_bytes(KEY_BYTES)
    finally:
        tmp.unlink(missing_ok=True)


def _read_key(path: Path) -> bytes:
    """The key in `path`; a file that holds none stops the master, saying so."""
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise ValueError(f"{path}: not a key (hex digits); remove it to have one made") from None
    if len(key) < KEY_BYTES // 2:
        raise ValueError(f"{path}: a key of {len(key)} bytes is too short; remove it")
    return key
