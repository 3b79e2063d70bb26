"""tbon for Python: front-ends and back-ends of a tbon tree.

A thin layer over libtbon (the C library, through cffi): the tree, its
streams, packets built and read by format string, events, filters loaded by
path (plug-ins stay C), and the network's descriptor for an event loop
(``Network.fileno``; ``tbon.aio`` for asyncio). python/README.md is the
guide; docs/api.md is the contract of the calls underneath.

    import tbon
    with tbon.FrontEnd("tree.top", "./my_backend.py") as net:
        s = net.stream(up=tbon.FILTER_SUM)
        s.send(100, "%ud", 1)
        print(net.recv().values)
"""
import functools
import os
import sys
from collections import namedtuple

from ._lib import ffi, lib, path as library_path

__all__ = [
    "Error", "FrontEnd", "BackEnd", "Network", "Stream", "Packet", "Event",
    "FILTER_NULL", "FILTER_SUM", "FILTER_MIN", "FILTER_MAX", "FILTER_AVG",
    "FILTER_CONCAT", "FILTER_UNION", "SYNC_WAITFORALL", "SYNC_DONTWAIT", "SYNC_TIMEOUT",
    "FIRST_APP_TAG", "library_path",
]

FILTER_NULL, FILTER_SUM, FILTER_MIN, FILTER_MAX, FILTER_AVG, FILTER_CONCAT, \
    FILTER_UNION = range(7)
SYNC_WAITFORALL, SYNC_DONTWAIT, SYNC_TIMEOUT = range(3)
FIRST_APP_TAG = 100

# error codes (tbon/common.h)
OK, EINVAL, ENOMEM, ETIMEOUT, ECLOSED, EFORMAT, ETOPOLOGY, ELAUNCH, EFILTER, EIO, \
    EAUTH, ENOTFOUND, ELOST, ETOOBIG, EBUSY = 0, -1, -2, -3, -4, -5, -6, -7, -8, -9, \
    -10, -11, -12, -13, -14

# event types (tbon/net.h)
EVENT_NAMES = ("failed", "adopted", "joined", "left", "view stable", "data lost",
               "suspect", "alive", "filter error", "unreachable")
(EV_NODE_FAILED, EV_NODE_ADOPTED, EV_NODE_JOINED, EV_NODE_LEFT, EV_VIEW_STABLE,
 EV_DATA_LOST, EV_NODE_SUSPECT, EV_NODE_ALIVE, EV_FILTER_ERROR,
 EV_UNREACHABLE) = range(10)


class Error(Exception):
    """A failed call: .code is the TBON_E* code (tbon.ETIMEOUT, ...), the
    message is tbon_net_error's."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class Closed(Error):
    """The network has shut down (TBON_ECLOSED)."""


class Timeout(Error):
    """Nothing within the time given (TBON_ETIMEOUT)."""


def _raise(code, net=ffi.NULL, what=""):
    msg = ffi.string(lib.tbon_net_error(net)).decode(errors="replace")
    if not msg:
        msg = ffi.string(lib.tbon_strerror(code)).decode()
    if what:
        msg = "%s: %s" % (what, msg)
    cls = Closed if code == ECLOSED else Timeout if code == ETIMEOUT else Error
    raise cls(code, msg)


# ---- packets ----

# conversion -> (C type of one value, how it travels through "...")
_SCALAR = {
    "c": ("char", "int"), "uc": ("unsigned char", "int"),
    "hd": ("int16_t", "int"), "uhd": ("uint16_t", "int"),
    "d": ("int32_t", "int32_t"), "ud": ("uint32_t", "uint32_t"),
    "ld": ("int64_t", "int64_t"), "uld": ("uint64_t", "uint64_t"),
    "f": ("float", "double"), "lf": ("double", "double"),
}


@functools.lru_cache(maxsize=256)
def _conversions(fmt):
    """The conversions of fmt, in order ("%d %as" -> ("d", "as")); kept for
    the formats used last (a tool sends few)."""
    out = []
    for part in fmt.replace("%", " %").split():
        if not part.startswith("%") or len(part) < 2:
            raise Error(EFORMAT, "format %r: %r is no conversion" % (fmt, part))
        conv = part[1:]
        base = conv[1:] if conv.startswith("a") else conv
        if base not in _SCALAR and base != "s":
            raise Error(EFORMAT, "format %r: unknown conversion %%%s" % (fmt, conv))
        out.append(conv)
    return tuple(out)


_RANGE = {
    "c": (-2 ** 7, 2 ** 7), "uc": (0, 2 ** 8), "hd": (-2 ** 15, 2 ** 15), "uhd": (0, 2 ** 16),
    "d": (-2 ** 31, 2 ** 31), "ud": (0, 2 ** 32), "ld": (-2 ** 63, 2 ** 63), "uld": (0, 2 ** 64),
}


def _scalar_in(conv, v):
    """v as conversion conv takes it; an integer out of its range is an
    error (C would cut it short without a word)."""
    if conv in ("c", "uc") and isinstance(v, (bytes, str)):
        v = ord(v)
    r = _RANGE.get(conv)
    if r and not (isinstance(v, int) and r[0] <= v < r[1]):
        raise Error(EINVAL, "%r does not fit %%%s (%d to %d)" % (v, conv, r[0], r[1] - 1))
    return v


def _pack_args(fmt, values):
    """cdata arguments for tbon_packet_new's "..." (and what keeps them
    alive)."""
    convs = _conversions(fmt)
    if len(convs) != len(values):
        raise Error(EINVAL, "format %r has %d conversions, %d values given" %
                    (fmt, len(convs), len(values)))
    args, keep = [], []
    for conv, v in zip(convs, values):
        if conv == "s":
            b = v.encode() if isinstance(v, str) else bytes(v)
            c = ffi.new("char[]", b)
            keep.append(c)
            args.append(c)
        elif conv == "as":
            strs = [ffi.new("char[]", s.encode() if isinstance(s, str) else bytes(s))
                    for s in v]
            arr = ffi.new("char *[]", strs) if strs else ffi.NULL
            keep += [strs, arr]
            args += [ffi.cast("char **", arr), ffi.cast("size_t", len(strs))]
        elif conv.startswith("a"):
            ctype = _SCALAR[conv[1:]][0]
            if conv in ("ac", "auc") and isinstance(v, (bytes, bytearray, memoryview)):
                v = bytes(v)
                arr = ffi.from_buffer("%s[]" % ctype, v) if v else ffi.NULL
            else:
                v = [_scalar_in(conv[1:], x) for x in v]
                arr = ffi.new("%s[]" % ctype, v) if v else ffi.NULL
            keep.append(arr)
            args += [ffi.cast("%s *" % ctype, arr), ffi.cast("size_t", len(v))]
        else:
            args.append(ffi.cast(_SCALAR[conv][1], _scalar_in(conv, v)))
    return args, keep


def _new_packet(tag, fmt, values):
    args, keep = _pack_args(fmt, values)
    p = lib.tbon_packet_new(ffi.cast("int", tag), fmt.encode(), *args)
    del keep
    if p == ffi.NULL:
        raise Error(EINVAL, "cannot build a packet of format %r from %r (a value out "
                    "of range, or a format error)" % (fmt, values))
    return p


def _unpack(p, fmt):
    convs = _conversions(fmt)
    ptrs, args = [], []
    for conv in convs:
        if conv == "s":
            q = ffi.new("char **")
            ptrs.append(q)
            args.append(q)
        elif conv == "as":
            q, n = ffi.new("char ***"), ffi.new("size_t *")
            ptrs.append((q, n))
            args += [q, n]
        elif conv.startswith("a"):
            q, n = ffi.new("%s **" % _SCALAR[conv[1:]][0]), ffi.new("size_t *")
            ptrs.append((q, n))
            args += [q, n]
        else:
            # (%c as a signed byte: C's char is signed here, and the value -5)
            q = ffi.new("signed char *" if conv == "c" else "%s *" % _SCALAR[conv][0])
            ptrs.append(q)
            args.append(q)
    rc = lib.tbon_packet_unpack(p, fmt.encode(), *args)
    if rc != 0:
        _raise(rc, what="unpack")
    out = []
    for conv, q in zip(convs, ptrs):
        if conv == "s":
            out.append(ffi.string(q[0]).decode(errors="surrogateescape"))
            lib.free(q[0])
        elif conv == "as":
            arr, n = q[0][0], q[1][0]
            out.append([ffi.string(arr[i]).decode(errors="surrogateescape")
                        for i in range(n)])
            for i in range(n):
                lib.free(arr[i])
            lib.free(arr)
        elif conv.startswith("a"):
            arr, n = q[0][0], q[1][0]
            if conv in ("ac", "auc"):
                out.append(bytes(ffi.buffer(arr, n)) if n else b"")
            else:
                out.append(list(arr[0:n]) if n else [])
            lib.free(arr)
        else:
            out.append(q[0])
    return tuple(out)


class Packet:
    """A received packet: its tag, format, stream and the node that made it;
    its values by .values (as its format says) or .unpack(fmt)."""

    __slots__ = ("_p", "stream")

    def __init__(self, p, stream=None):
        self._p = ffi.gc(p, lib.tbon_packet_unref)
        self.stream = stream

    @property
    def tag(self):
        return lib.tbon_packet_tag(self._p)

    @property
    def format(self):
        return ffi.string(lib.tbon_packet_format(self._p)).decode()

    @property
    def source(self):
        return lib.tbon_packet_source(self._p)

    def unpack(self, fmt):
        """The values, as a tuple, for fmt (which must match the packet's)."""
        return _unpack(self._p, fmt)

    @property
    def values(self):
        return _unpack(self._p, self.format) if self.format else ()

    def _ranks(self, fn):
        n = fn(self._p, ffi.NULL, 0)
        out = ffi.new("tbon_rank_t[]", max(n, 1))
        fn(self._p, out, n)
        return list(out[0:n])

    @property
    def covered(self):
        """The back-ends whose contributions a result holds."""
        return self._ranks(lib.tbon_packet_covered)

    @property
    def missing(self):
        """The back-ends a result lacks (failed ones, named)."""
        return self._ranks(lib.tbon_packet_missing)

    def __repr__(self):
        return "<tbon.Packet tag %d %r %r>" % (self.tag, self.format, self.values)


Event = namedtuple("Event", "type name rank parent incarnation view_version stream "
                   "filter signal detail")

NodeStatus = namedtuple("NodeStatus", "rank role state since_s host parent rtt_ms")

_PERF_NODE = ("rss_bytes", "cpu_us", "queued_bytes", "stream_queued_bytes", "link_resends",
              "relinks", "crc_errors", "uptime_ms", "children", "messages_dropped")
_PERF_STREAM = ("up_in_packets", "up_in_bytes", "up_out_packets", "up_out_bytes",
                "down_in_packets", "down_in_bytes", "down_out_packets", "down_out_bytes",
                "waves", "filter_calls", "filter_ns", "filter_cpu_ns", "queued_bytes")


class Perf:
    """What FrontEnd.perf gathered: .nodes (a dict per rank: rank, role,
    host, alive, answered and the figures of tbon_perf_node_t), .streams
    (a dict per stream at each node: rank, stream and the figures of
    tbon_perf_stream_t), .answered, .silent, .rounds, .elapsed_ms, and
    .error: None when every live node answered, else what the library
    said (the silent ranks)."""

    def __init__(self, p, error):
        roles = ("fe", "commnode", "be")
        self.nodes = []
        for n in p.nodes[0:p.nnodes]:
            d = {"rank": n.rank, "role": roles[n.role] if 0 <= n.role < 3 else "?",
                 "host": ffi.string(n.host).decode(errors="replace"),
                 "alive": bool(n.alive), "answered": bool(n.answered)}
            d.update({k: getattr(n, k) for k in _PERF_NODE})
            self.nodes.append(d)
        self.streams = []
        for st in p.streams[0:p.nstreams]:
            d = {"rank": st.rank, "stream": st.stream}
            d.update({k: getattr(st, k) for k in _PERF_STREAM})
            self.streams.append(d)
        self.answered, self.silent = p.answered, p.silent
        self.rounds, self.elapsed_ms = p.rounds, p.elapsed_ms
        self.error = error

    def stream(self, rank, stream):
        """The record of stream (an id or a Stream) at rank, or None."""
        sid = stream.id if hasattr(stream, "id") else stream
        for d in self.streams:
            if d["rank"] == rank and d["stream"] == sid:
                return d
        return None


# ---- streams and networks ----

class Stream:
    """A stream of a network: packets sent down it (front-end) or up it
    (back-end), and received from it."""

    __slots__ = ("_s", "net", "id")

    def __init__(self, s, net):
        self._s = s
        self.net = net
        self.id = lib.tbon_stream_id(s)

    def send(self, tag, fmt="", *values):
        """Send a packet of tag (>= tbon.FIRST_APP_TAG) and format fmt with
        values, e.g. s.send(100, "%ud %s", 7, "int")."""
        p = _new_packet(tag, fmt, values)
        rc = lib.tbon_stream_send_packet(self._s, p)
        lib.tbon_packet_unref(p)
        if rc != 0:
            _raise(rc, self.net._net, "send")

    def flush(self):
        rc = lib.tbon_stream_flush(self._s)
        if rc != 0:
            _raise(rc, self.net._net, "flush")

    def recv(self, timeout=None):
        """The next packet of this stream (timeout in seconds; None: wait)."""
        pp = ffi.new("tbon_packet_t **")
        rc = lib.tbon_stream_recv(self._s, pp, _ms(timeout))
        if rc != 0:
            _raise(rc, self.net._net, "recv")
        return Packet(pp[0], self)

    def close(self):
        rc = lib.tbon_stream_close(self._s)
        if rc != 0:
            _raise(rc, self.net._net, "close")

    def __repr__(self):
        return "<tbon.Stream %d>" % self.id


def _ms(timeout):
    if timeout is None:
        return -1
    return max(0, int(timeout * 1000))


class Network:
    """What a front-end and a back-end share: receiving, events, the
    descriptor, destroying. Use as a context manager, or call close()."""

    def __init__(self, net):
        self._net = net
        self._streams = {}

    def _stream(self, s):
        sid = lib.tbon_stream_id(s)
        st = self._streams.get(sid)
        if st is None or st._s != s:
            st = self._streams[sid] = Stream(s, self)
        return st

    def _live(self):
        if self._net is None:
            raise Closed(ECLOSED, "the network was destroyed")
        return self._net

    @property
    def rank(self):
        return lib.tbon_net_rank(self._live())

    def backends(self):
        """The ranks of the live back-ends."""
        net = self._live()
        n = lib.tbon_net_num_backends(net)
        out = ffi.new("tbon_rank_t[]", max(n, 1))
        k = lib.tbon_net_backends(net, out, n)
        return sorted(out[0:min(k, n)])

    def recv(self, timeout=None):
        """The next packet of any stream (timeout in seconds; None: wait;
        0: only what is here). Raises tbon.Timeout, tbon.Closed, or
        tbon.Error (a lost wave, a filter's failure)."""
        net = self._live()
        pp, sp = ffi.new("tbon_packet_t **"), ffi.new("tbon_stream_t **")
        rc = lib.tbon_net_recv(net, pp, sp, _ms(timeout))
        if rc != 0:
            _raise(rc, net, "recv")
        return Packet(pp[0], self._stream(sp[0]))

    def next_event(self, timeout=None):
        """The next membership event (an Event), as recv."""
        net = self._live()
        ev = ffi.new("tbon_event_t *")
        rc = lib.tbon_net_next_event(net, ev, _ms(timeout))
        if rc != 0:
            _raise(rc, net, "next_event")
        return Event(ev.type, EVENT_NAMES[ev.type] if ev.type < len(EVENT_NAMES) else "?",
                     ev.rank, ev.parent, ev.incarnation, ev.view_version, ev.stream,
                     ev.filter, ev.signal, ffi.string(ev.detail).decode(errors="replace"))

    @property
    def log_dir(self):
        """The session's log directory on this host (tbon_net_log_dir)."""
        p = lib.tbon_net_log_dir(self._live())
        return None if p == ffi.NULL else ffi.string(p).decode(errors="surrogateescape")

    def send_to(self, to, tag, fmt="", *values):
        """A message to another process (a rank, or a list of ranks: each
        once), or with to None to every back-end and the FE but this one:
        tbon_net_send_to, tbon_net_multicast, tbon_net_broadcast."""
        net = self._live()
        args, keep = _pack_args(fmt, values)
        tag, cfmt = ffi.cast("int", tag), fmt.encode()
        if to is None:
            rc = lib.tbon_net_broadcast(net, tag, cfmt, *args)
        elif isinstance(to, int):
            rc = lib.tbon_net_send_to(net, to, tag, cfmt, *args)
        else:
            ranks = ffi.new("tbon_rank_t[]", list(to))
            rc = lib.tbon_net_multicast(net, ranks, len(to), tag, cfmt, *args)
        del keep
        if rc != 0:
            _raise(rc, net, "send_to")

    def recv_direct(self, timeout=None):
        """The next message from another process: (sender's rank, Packet);
        as recv."""
        net = self._live()
        pp, fp = ffi.new("tbon_packet_t **"), ffi.new("tbon_rank_t *")
        rc = lib.tbon_net_recv_direct(net, fp, pp, _ms(timeout))
        if rc != 0:
            _raise(rc, net, "recv_direct")
        return fp[0], Packet(pp[0])

    def fileno(self):
        """The network's descriptor (tbon_net_fd): readable while recv,
        next_event (or a message) would return at once, and for good once
        the network has shut down. Level-triggered: take everything each
        time. Owned by the network: watch it, never read or close it."""
        net = self._live()
        fd = lib.tbon_net_fd(net)
        if fd < 0:
            _raise(fd, net, "fileno")
        return fd

    def close(self):
        """tbon_net_destroy: at the front-end the whole tree ends; a
        back-end leaves. Other threads waiting in this network's calls
        return tbon.Closed first."""
        if self._net is not None:
            net, self._net = self._net, None
            lib.tbon_net_destroy(net)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


_OPTION_FIELDS = ("commnode_path", "rsh", "attach_file", "startup_timeout_ms",
                  "heartbeat_ms", "no_fault_tolerance", "suspect_ms", "fe_host", "env",
                  "slurm", "slurm_fanout", "slurm_be_per_node", "require_all", "exact_off",
                  "session_file", "grace_ms", "detach_ms", "allow_flat")


class FrontEnd(Network):
    """Launch the tree of a topology file with backend (a program, run with
    argv) at its leaves: tbon_fe_create. Options are tbon_fe_options_t's
    fields by name (startup_timeout_ms=60000, commnode_path=..., ...).
    A back-end written in Python is a script with a #! line, made
    executable, or any program that runs it."""

    def __init__(self, topology, backend, argv=(), **options):
        opts = ffi.new("tbon_fe_options_t *")
        self._keep = []
        for k, v in options.items():
            if k not in _OPTION_FIELDS:
                raise TypeError("FrontEnd: unknown option %r (tbon_fe_options_t has %s)" %
                                (k, ", ".join(_OPTION_FIELDS)))
            if isinstance(v, str):
                v = ffi.new("char[]", v.encode())
                self._keep.append(v)
            setattr(opts, k, v)
        cargv = [ffi.new("char[]", os.fsencode(a)) for a in argv] + [ffi.NULL]
        argv_arr = ffi.new("char *[]", cargv)
        err = ffi.new("tbon_error_t *")
        net = lib.tbon_fe_create(os.fsencode(topology), os.fsencode(backend)
                                 if backend is not None else ffi.NULL,
                                 ffi.cast("const char *const *", argv_arr), opts, err)
        if net == ffi.NULL:
            cls = Closed if err.code == ECLOSED else Error
            raise cls(err.code, ffi.string(err.msg).decode(errors="replace"))
        super().__init__(net)

    def stream(self, up=FILTER_NULL, sync=SYNC_WAITFORALL, down=FILTER_NULL, backends=None):
        """A new stream over every back-end (or the ranks of backends) with
        the up filter (a built-in FILTER_* or an id from load_filter), sync
        mode and down filter."""
        net = self._live()
        if backends is None:
            comm = lib.tbon_fe_broadcast_comm(net)
        else:
            ranks = ffi.new("tbon_rank_t[]", list(backends))
            comm = lib.tbon_fe_comm_new(net, ranks, len(backends))
        if comm == ffi.NULL:
            _raise(EINVAL, net, "stream")
        s = lib.tbon_fe_stream_new(net, comm, up, sync, down)
        if s == ffi.NULL:
            _raise(EINVAL, net, "stream")
        return self._stream(s)

    def status(self, ping_timeout=1.0):
        """Every node of the tree as a NodeStatus (rank, role "fe" /
        "commnode" / "be", state "ok" / "suspect" / "adopted" / "failed" /
        "missing" / "joined" / "left", seconds in it, host, parent, a ping's
        round trip in ms or None): tbon_fe_status, each live node pinged
        (waiting at most ping_timeout seconds; None: no pings)."""
        net = self._live()
        n = lib.tbon_fe_status(net, ffi.NULL, 0, 0)
        out = ffi.new("tbon_node_status_t[]", max(n, 1))
        n = lib.tbon_fe_status(net, out, n, _ms(ping_timeout) if ping_timeout else 0)
        if n < 0:
            _raise(n, net, "status")
        roles = ("fe", "commnode", "be")
        return [NodeStatus(s.rank, roles[s.role] if 0 <= s.role < 3 else "?",
                           ffi.string(lib.tbon_node_state_name(s.state)).decode(), s.since_s,
                           ffi.string(s.host).decode(errors="replace"),
                           None if s.parent == 0xffffffff else s.parent,
                           None if s.rtt_ms < 0 else s.rtt_ms) for s in out[0:n]]

    def perf(self, timeout=10.0):
        """Every node's performance data, gathered up the tree
        (tbon_fe_perf): a Perf. Some live node silent past timeout seconds
        is no exception: the Perf says so (.silent, .error)."""
        net = self._live()
        out = ffi.new("tbon_perf_t **")
        rc = lib.tbon_fe_perf(net, out, _ms(timeout))
        if out[0] == ffi.NULL:
            _raise(rc, net, "perf")
        try:
            err = None if rc == 0 else ffi.string(lib.tbon_net_error(net)).decode()
            return Perf(out[0], err)
        finally:
            lib.tbon_perf_free(out[0])

    def load_filter(self, so_path, func):
        """Load plug-in filter func from so_path here and at every node (all
        or nothing); its id, for stream(up=...)."""
        net = self._live()
        rc = lib.tbon_fe_load_filter(net, os.fsencode(so_path), func.encode())
        if rc < 0:
            _raise(rc, net, "load_filter")
        return rc


class BackEnd(Network):
    """Join the tree as the back-end it launched: tbon_be_create over argv
    (default sys.argv; the launcher's own arguments are taken out, and
    .argv is what is left)."""

    def __init__(self, argv=None):
        argv = list(sys.argv if argv is None else argv)
        cargs = [ffi.new("char[]", os.fsencode(a)) for a in argv]
        arr = ffi.new("char *[]", cargs + [ffi.NULL])
        pargc, pargv = ffi.new("int *", len(argv)), ffi.new("char ***", arr)
        err = ffi.new("tbon_error_t *")
        net = lib.tbon_be_create(pargc, pargv, err)
        if net == ffi.NULL:
            raise Error(err.code, ffi.string(err.msg).decode(errors="replace"))
        self.argv = [os.fsdecode(ffi.string(pargv[0][i])) for i in range(pargc[0])]
        self._keep = (cargs, arr)
        super().__init__(net)

    def membership_events(self, on=True):
        """Have the view's changes queued here as events (next_event):
        tbon_be_membership_events."""
        rc = lib.tbon_be_membership_events(self._live(), 1 if on else 0)
        if rc != 0:
            _raise(rc, self._net, "membership_events")

    def __iter__(self):
        """Every packet until the front-end shuts the tree down."""
        while True:
            try:
                yield self.recv()
            except Closed:
                return
