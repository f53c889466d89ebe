"""A credentials store: who may connect to the broker, as what, and what each may touch.

    DIR/principals.json   names, kinds, roles and operation grants; no secrets (the master
                          reads it)
    DIR/passwd            the broker's password file (mosquitto's PBKDF2-SHA512 format)
    DIR/acl               mosquitto's ACL file, made from principals.json
    DIR/ca.pem, ca.key    the store's own certificate authority
    DIR/broker.pem, .key  the broker's TLS certificate, signed by that CA
    DIR/framework-ids.key the key under which masters prove whose a framework id is
    DIR/secrets/NAME      a principal's secret, only where asked for (the demo, compose)

A principal may hold many MQTT connections (Mesos lets many frameworks share one); each
connection's client id is the principal's name and an HMAC under its secret, which no
other principal can compute, so none can take over another's session. What a principal may
publish and read follows from its kind alone (`acl_rules`): each publishes only under
`in/<kind>/<name>`, and reads only its own outbox `out/<kind>/<name>/#`; the master reads
every inbox and writes every outbox; operators and the master read the state and the event
stream.

Secrets are 32 random bytes; the broker keeps only their PBKDF2 hashes. The hashing is
`hashlib.pbkdf2_hmac` written in the format mosquitto reads (`$7$iterations$salt$hash`),
so one file serves mosquitto and our amqtt plugin alike.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from protocol.extras import needs
from protocol.tooling.operation_grants import Grant, GrantError, Grants, check_operation
from protocol.wire.roles import role_problem
from protocol.wire.topics import ROOT

KINDS = ("master", "slave", "framework", "operator")
FRAMEWORK_IDS_KEY = "framework-ids.key"  # (master.framework_ids reads it)
Kind = Literal["master", "slave", "framework", "operator"]
PBKDF2_ITERATIONS = 10_000  # the secrets are 256 random bits: stretching adds little
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class CredentialsError(ValueError):
    """A store or a principal that cannot be made, read or used as asked."""


def check_name(name: str) -> str:
    # (a name becomes a file's, its secret's: '.' and '..' are directories)
    if not NAME.match(name) or name in (".", ".."):
        raise CredentialsError(
            f"principal name {name!r} must be 1-64 letters, digits, '_', '.' or '-' "
            "(not '.' or '..')"
        )
    return name


def check_role(role: str) -> str:
    """As the master's role names: '/'-separated names, none of them '.' or '..'."""
    if problem := role_problem(role):
        raise CredentialsError(problem)
    return role


@dataclass(frozen=True)
class Principal:
    name: str
    kind: Kind
    roles: tuple[str, ...] = ()  # frameworks only: the roles it may register in
    # what an operator let it do (or not) to whose resources are, beyond the defaults
    # (`protocol.tooling.operation_grants`): RESERVE is off for frameworks until granted
    grants: Grants = field(default_factory=Grants)

    def may_use_role(self, role: str) -> bool:
        return self.kind == "framework" and role in self.roles

    def may(self, operation: str, role: str | None = None) -> bool:
        """Whether it may make `operation` on resources reserved for `role` (None: for
        some role)."""
        return self.grants.may(self.kind, operation, role)

    @property
    def reserve(self) -> bool:
        """May it RESERVE at all (`drfmesos auth reserve`)."""
        return self.may("reserve")


# -- hashing ----------------------------------------------------------------------------------


def hash_secret(secret: str, *, iterations: int = PBKDF2_ITERATIONS) -> str:
    salt = os.urandom(12)
    digest = hashlib.pbkdf2_hmac("sha512", secret.encode(), salt, iterations)
    return f"$7${iterations}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, hashed: str) -> bool:
    """Check a secret against a `$7$` hash; False for anything malformed."""
    try:
        _, seven, iterations, salt, digest = hashed.split("$")
        if seven != "7" or not 1 <= int(iterations) <= 10_000_000:
            return False
        want = base64.b64decode(digest, validate=True)
        got = hashlib.pbkdf2_hmac(
            "sha512", secret.encode(), base64.b64decode(salt, validate=True), int(iterations)
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, want)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def new_secret() -> str:
    return secrets.token_urlsafe(32)


# -- what each kind may touch ------------------------------------------------------------------


def acl_rules(principal: Principal) -> list[tuple[str, str]]:
    """(access, topic filter) pairs, access being `read` or `write`; for every cluster."""
    p, n = f"{ROOT}/+", principal.name
    rules = {
        "master": [
            ("read", f"{p}/in/#"),
            ("read", f"{p}/gone/#"),
            ("write", f"{p}/out/#"),
            ("write", f"{p}/leader"),
            ("write", f"{p}/state"),
            ("write", f"{p}/events"),
            ("write", f"{p}/gone/master/{n}"),
        ],
        "operator": [
            ("read", "$SYS/#"),  # the broker's own statistics
            ("read", f"{p}/leader"),
            ("read", f"{p}/state"),
            ("read", f"{p}/events"),
            ("read", f"{p}/out/operator/{n}/#"),
            ("write", f"{p}/in/operator/{n}"),
        ],
    }.get(principal.kind)
    if rules is None:  # slaves and frameworks: their own inbox, outbox and Last Will
        kind = principal.kind
        rules = [
            ("read", f"{p}/out/{kind}/{n}/#"),
            ("read", f"{p}/leader"),  # to follow a master failover
            ("write", f"{p}/in/{kind}/{n}"),
            ("write", f"{p}/gone/{kind}/{n}"),
        ]
    return rules


def mosquitto_acl(principals: list[Principal]) -> str:
    lines = ["# made by drfmesos from principals.json: edit that with `drfmesos auth`", ""]
    for principal in sorted(principals, key=lambda q: q.name):
        lines.append(f"user {principal.name}")
        lines += [f"topic {access} {topic}" for access, topic in acl_rules(principal)]
        lines.append("")
    return "\n".join(lines)


def filter_allows(allowed: str, requested: str) -> bool:
    """Does the ACL filter `allowed` cover `requested` (a topic, or a subscription filter)?"""
    want, have = requested.split("/"), allowed.split("/")
    for i, level in enumerate(have):
        if level == "#":
            return True
        if i >= len(want):
            return False
        if level == "+":
            if want[i] == "#":
                return False
            continue
        if want[i] != level:
            return False
    return len(want) == len(have)


# -- the store -----------------------------------------------------------------------------------


@dataclass
class Store:
    path: Path
    principals: dict[str, Principal] = field(default_factory=dict)

    @property
    def ca(self) -> Path:
        return self.path / "ca.pem"

    @property
    def broker_cert(self) -> Path:
        return self.path / "broker.pem"

    @property
    def broker_key(self) -> Path:
        return self.path / "broker.key"

    @property
    def passwd(self) -> Path:
        return self.path / "passwd"

    @property
    def acl(self) -> Path:
        return self.path / "acl"

    @property
    def principals_file(self) -> Path:
        return self.path / "principals.json"

    def secret_file(self, name: str) -> Path:
        return self.path / "secrets" / check_name(name)

    @classmethod
    def init(cls, path: Path, hostnames: tuple[str, ...] = ()) -> Store:
        """A new, empty store with a CA and a broker certificate for `hostnames`."""
        if (path / "principals.json").exists():
            raise CredentialsError(f"{path} already holds a credentials store")
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, 0o700)
        store = cls(path)
        make_certificates(path, ("localhost", "127.0.0.1", *hostnames))
        # made here, not by the first master, so that every copy of the store (another
        # master host, the compose cluster's mounts) carries the same one
        write_private(path / FRAMEWORK_IDS_KEY, secrets.token_hex(32) + "\n")
        store.save({})
        return store

    @classmethod
    def open(cls, path: Path) -> Store:
        return cls(path, load_principals(path / "principals.json"))

    def add(
        self,
        name: str,
        kind: str,
        roles: tuple[str, ...] = (),
        *,
        keep_secret: bool = False,
        reserve: bool = False,
    ) -> str:
        """Add a principal and return its new secret (kept only as a hash)."""
        check_name(name)
        if kind not in KINDS:
            raise CredentialsError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if name in self.principals:
            raise CredentialsError(f"principal {name!r} exists: remove it first")
        if (roles or reserve) and kind != "framework":  # (an operator reserves already)
            raise CredentialsError("--roles and --reserve are for framework principals")
        for role in roles:
            check_role(role)
        if kind == "framework" and not roles:
            roles = (name,)  # as Mesos: by default a principal registers in its own role
        secret = new_secret()
        hashes = self._hashes()
        hashes[name] = hash_secret(secret)
        grants = Grants().setting("reserve", Grant(True)) if reserve else Grants()
        principals = {**self.principals, name: Principal(name, kind, roles, grants)}  # type: ignore[arg-type]
        self.save(principals, hashes)
        if keep_secret:
            write_private(self.secret_file(name), secret + "\n")
        return secret

    def may_reserve(self, name: str, allowed: bool) -> None:
        """Grant (or take back) a framework principal's RESERVE: its secret stays."""
        known = self.principals.get(name)
        if known is None or known.kind != "framework":
            raise CredentialsError(f"no framework principal {name!r} in {self.path}")
        self.grant(name, "reserve", allowed)

    def grant(
        self, name: str, operation: str, allowed: bool, roles: tuple[str, ...] = ()
    ) -> Principal:
        """Let principal `name` make `operation` (for `roles` only, if any), or no longer
        (`allowed` False): a framework's or an operator's. Its secret stays."""
        known = self.principals.get(name)
        if known is None or known.kind not in ("framework", "operator"):
            raise CredentialsError(f"no framework or operator principal {name!r} in {self.path}")
        if roles and not allowed:
            raise CredentialsError("a revoked operation names no roles")
        try:
            check_operation(operation)
        except GrantError as e:
            raise CredentialsError(str(e)) from None
        grants = known.grants.setting(operation, Grant(allowed, tuple(map(check_role, roles))))
        changed = dataclasses.replace(known, grants=grants)
        self.save({**self.principals, name: changed})
        return changed

    def rotate(self, name: str, *, keep_secret: bool = False) -> str:
        """Give principal `name` a new secret and return it; its kind, roles and grants
        stay (`remove` then `add` dropped its grants). What connected with the old one is
        ended by the brokers and refused by the master's HTTP API, as for a removal."""
        if name not in self.principals:
            raise CredentialsError(f"no principal {name!r} in {self.path}")
        secret = new_secret()
        self.save(self.principals, {**self._hashes(), name: hash_secret(secret)})
        if keep_secret:
            write_private(self.secret_file(name), secret + "\n")
        else:  # (the old one there works no more)
            self.secret_file(name).unlink(missing_ok=True)
        return secret

    def remove(self, name: str) -> None:
        if name not in self.principals:
            raise CredentialsError(f"no principal {name!r} in {self.path}")
        principals = {k: v for k, v in self.principals.items() if k != name}
        hashes = {k: v for k, v in self._hashes().items() if k != name}
        self.save(principals, hashes)
        self.secret_file(name).unlink(missing_ok=True)

    def _hashes(self) -> dict[str, str]:
        return read_passwd(self.passwd) if self.passwd.exists() else {}

    def save(self, principals: dict[str, Principal], hashes: dict[str, str] | None = None) -> None:
        """Write every file from the principals (atomically each), then adopt them."""
        if hashes is not None or not self.passwd.exists():
            body = "".join(f"{n}:{h}\n" for n, h in sorted((hashes or {}).items()))
            write_private(self.passwd, body)
        write_private(self.acl, mosquitto_acl(list(principals.values())))
        doc = {
            "principals": [
                {"name": q.name, "kind": q.kind, "roles": list(q.roles)}
                # (`reserve` too, for a master from before the grants: rolling upgrades)
                | ({"reserve": True} if q.grants.get("reserve") == Grant(True) else {})
                | ({"operations": q.grants.to_json()} if q.grants.given else {})
                for q in sorted(principals.values(), key=lambda q: q.name)
            ]
        }
        write_private(self.principals_file, json.dumps(doc, indent=2) + "\n", mode=0o644)
        self.principals = principals


def read_passwd(path: Path) -> dict[str, str]:
    """A password file (`name:hash` lines) -> {name: hash}."""
    out = {}
    for line in path.read_text().splitlines():
        name, sep, hashed = line.partition(":")
        if sep:
            out[name] = hashed
    return out


def load_principals(path: Path) -> dict[str, Principal]:
    """principals.json -> {name: Principal}; raises CredentialsError with what is wrong."""
    try:
        doc = json.loads(path.read_text())
        out = {}
        for entry in doc["principals"]:
            name, kind = check_name(str(entry["name"])), str(entry["kind"])
            if kind not in KINDS:
                raise CredentialsError(f"{name}: unknown kind {kind!r}")
            if name in out:  # (else the last would win, unsaid: whose is the name?)
                raise CredentialsError(f"{name}: named twice")
            try:  # (`reserve`: files before the grants, still read)
                grants = Grants.from_json(
                    entry.get("operations"), reserve=entry.get("reserve", False)
                )
                for _, grant in grants.given:
                    for role in grant.roles:
                        check_role(role)
            except (GrantError, CredentialsError) as e:
                raise CredentialsError(f"{name}: {e}") from None
            roles = entry.get("roles", [])
            if not isinstance(roles, list):  # (a string would be read as its letters)
                raise CredentialsError(f"{name}: roles is a list of role names, not {roles!r}")
            try:
                checked = tuple(check_role(str(r)) for r in roles)
            except CredentialsError as e:  # (a file edited by hand: as `auth add` checks)
                raise CredentialsError(f"{name}: {e}") from None
            out[name] = Principal(name, kind, checked, grants)  # type: ignore[arg-type]
        return out
    except FileNotFoundError:
        raise CredentialsError(
            f"no credentials store at {path.parent}: drfmesos auth init"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CredentialsError(f"{path}: {e}") from None


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write a file atomically, readable by its owner only (unless `mode` says more).
    Its temporary name is the writer's own (process and thread): two writing one file
    at once each replace it whole, neither moves the other's half-written one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


# -- TLS -----------------------------------------------------------------------------------------


def make_certificates(path: Path, hostnames: tuple[str, ...]) -> None:
    """A CA (ca.pem, ca.key) and a broker certificate it signs, for `hostnames`."""
    with needs("tls"):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drfmesos cluster CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hostnames):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def pem_key(k: ec.EllipticCurvePrivateKey) -> str:
        return k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()

    write_private(path / "ca.key", pem_key(ca_key))
    write_private(path / "ca.pem", ca.public_bytes(serialization.Encoding.PEM).decode(), 0o644)
    write_private(path / "broker.key", pem_key(key))
    write_private(
        path / "broker.pem", cert.public_bytes(serialization.Encoding.PEM).decode(), 0o644
    )
