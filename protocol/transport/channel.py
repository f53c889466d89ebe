"""A private line between a slave and one executor: messages over a socketpair.

As a Mesos executor talks only to its own agent, ours never touches the cluster's bus: the
slave makes a socketpair for each executor it starts and hands one end to the process
(its descriptor number in `DRFMESOS_EXECUTOR_FD`). So an executor needs no credentials,
cannot read anybody's topics, and can speak only for itself: the slave knows which
framework and executor sit at the other end of each line, whatever the messages say.

Frames are a 4-byte big-endian length and one message in the usual envelope (`codec`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

from protocol.wire.codec import DecodeError, Envelope, decode, encode
from protocol.wire.messages import Wire

MAX_FRAME = 4 * 1024 * 1024
_LENGTH = struct.Struct(">I")


class ChannelClosed(ConnectionError):
    """The other end went away."""


class Channel:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, sock: socket.socket) -> Channel:
        sock.setblocking(False)
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        return cls(reader, writer)

    @classmethod
    async def from_fd(cls, fd: int) -> Channel:
        return await cls.open(socket.socket(fileno=fd))

    def send(self, message: Wire) -> None:
        if self._writer.is_closing():
            raise ChannelClosed("the channel is closed")
        data = encode(message)
        self._writer.write(_LENGTH.pack(len(data)) + data)

    def buffered(self) -> int:
        """Bytes written and not yet taken by the other end (the kernel's socket buffer
        not counted)."""
        return self._writer.transport.get_write_buffer_size()

    async def receive(self) -> Envelope | DecodeError:
        """The next message, or the DecodeError saying why it is not one.

        Raises ChannelClosed at the end of the stream or on a frame over MAX_FRAME (after
        which the stream cannot be trusted to be in step)."""
        try:
            (length,) = _LENGTH.unpack(await self._reader.readexactly(_LENGTH.size))
            if length > MAX_FRAME:
                raise ChannelClosed(f"a frame of {length} bytes is over {MAX_FRAME}")
            data = await self._reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            raise ChannelClosed(str(e) or "end of stream") from None
        try:
            return decode(data)
        except DecodeError as e:
            e.size = length
            return e

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            # shielded: every closer awaits the one close future, and a closer cancelled
            # (an executor's watcher, mid-exit) must not cancel it under the others
            await asyncio.shield(self._writer.wait_closed())
