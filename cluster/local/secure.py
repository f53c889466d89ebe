"""A whole cluster on one machine, secure: a throwaway credentials store, a broker that
checks it (TLS included), and the URL each party connects with."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from protocol.tooling.brokers import (
    BrokerError,
    BrokerURL,
    EmbeddedBroker,
    MosquittoBroker,
    open_broker,
)
from protocol.tooling.credentials import Store


def provision(directory: Path, principals: Iterable[tuple[str, ...]]) -> Store:
    """A new store in `directory` with (name, kind) principals, secrets kept in files; a
    framework principal's roles may follow its kind (else it has its own)."""
    store = Store.init(directory)
    for name, kind, *roles in principals:
        store.add(name, kind, tuple(roles), keep_secret=True)
    return store


def as_principal(url: BrokerURL, store: Store, name: str) -> BrokerURL:
    """`url`, connecting as `name` with its secret from the store."""
    return url.with_credentials(name, store.secret_file(name).read_text().strip())


@contextlib.asynccontextmanager
async def open_cluster_broker(spec: str, store: Store | None) -> AsyncIterator[BrokerURL]:
    """`embedded` or `mosquitto`, checking `store` with TLS on; without a store, any
    broker `open_broker` takes."""
    if store is None:
        async with open_broker(spec) as url:
            yield url
        return
    broker: EmbeddedBroker | MosquittoBroker
    if spec == "embedded":
        broker = EmbeddedBroker(auth=store.path, tls=True)
    elif spec == "mosquitto":
        broker = MosquittoBroker(auth=store.path, tls=True)
    else:
        raise BrokerError(
            "a secure local cluster starts its own broker ('embedded' or 'mosquitto'); "
            "for a broker of your own, provision its principals with `drfmesos auth`, "
            "or pass --insecure"
        )
    await broker.start()
    try:
        yield broker.url
    finally:
        await broker.stop()
        if isinstance(broker, MosquittoBroker):
            broker.cleanup()
