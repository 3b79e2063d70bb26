"""tbon in an asyncio loop: the network's descriptor (tbon_net_fd) watched
with loop.add_reader, no thread of the program's own.

    async def main():
        with tbon.FrontEnd(topo, backend) as net:
            anet = tbon.aio.AsyncNetwork(net)
            s = net.stream(up=tbon.FILTER_SUM)
            s.send(100, "%ud", 1)
            p = await anet.recv()
            ev = await anet.next_event()

When the descriptor turns readable the reader takes everything the network
has with timeout 0 (it is level-triggered): packets into one queue, events
into another. recv and next_event wait on those queues; once the network
has shut down they raise tbon.Closed.
"""
import asyncio

from . import Closed, ECLOSED, Timeout


class AsyncNetwork:
    """An asyncio face of a tbon.Network (front-end or back-end)."""

    def __init__(self, net, loop=None):
        self.net = net
        self.loop = loop or asyncio.get_running_loop()
        self._packets = asyncio.Queue()
        self._events = asyncio.Queue()
        self._closed = False
        self._fd = net.fileno()
        self.loop.add_reader(self._fd, self._readable)

    def _readable(self):
        """The descriptor is readable: take all there is."""
        try:
            while True:
                self._events.put_nowait(self.net.next_event(0))
        except Timeout:
            pass
        except Closed:
            self._close()
            return
        try:
            while True:
                self._packets.put_nowait(self.net.recv(0))
        except Timeout:
            pass
        except Closed:
            self._close()
        except Exception as e:      # a lost wave, a filter's failure: in its place
            self._packets.put_nowait(e)

    def _close(self):
        if not self._closed:
            self._closed = True
            self.loop.remove_reader(self._fd)
            self._packets.put_nowait(None)
            self._events.put_nowait(None)

    async def _get(self, q):
        item = await q.get()
        if item is None:
            q.put_nowait(None)          # every later call learns it too
            raise Closed(ECLOSED, "the network has shut down")
        if isinstance(item, Exception):
            raise item
        return item

    async def recv(self):
        """The next packet of any stream (a tbon.Packet)."""
        return await self._get(self._packets)

    async def next_event(self):
        """The next membership event (a tbon.Event)."""
        return await self._get(self._events)

    def detach(self):
        """Stop watching the descriptor (before net.close())."""
        if not self._closed:
            self._closed = True
            self.loop.remove_reader(self._fd)
