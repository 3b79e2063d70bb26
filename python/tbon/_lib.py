"""The C library through cffi in ABI mode: its declarations, and finding
libtbon.so.

cffi's ABI mode reads the declarations below at import time and calls the
shared library through libffi: nothing is compiled when the package is
installed, so ``pip install`` needs no compiler and no headers, and one
package works with any build of libtbon.so of the same major version. The
price is a few hundred nanoseconds per call, which a tool that sends and
takes packets (not bytes) does not feel (bench/bench_python.py measures it).
"""
import ctypes.util
import os

import cffi

CDEF = r"""
typedef uint32_t tbon_rank_t;
typedef struct tbon_net tbon_net_t;
typedef struct tbon_comm tbon_comm_t;
typedef struct tbon_stream tbon_stream_t;
typedef struct tbon_packet tbon_packet_t;
typedef struct { int code; char msg[512]; } tbon_error_t;

typedef struct tbon_fe_options {
    const char *commnode_path;
    const char *rsh;
    const char *attach_file;
    int startup_timeout_ms;
    int heartbeat_ms;
    int no_fault_tolerance;
    int suspect_ms;
    void (*progress)(void *arg, size_t ready, size_t total);
    void *progress_arg;
    const char *fe_host;
    const char *env;
    int slurm;
    unsigned slurm_fanout;
    unsigned slurm_be_per_node;
    int require_all;
    int exact_off;
    const char *session_file;
    int grace_ms;
    int detach_ms;
    int allow_flat;
} tbon_fe_options_t;

typedef struct tbon_event {
    int type;
    tbon_rank_t rank;
    tbon_rank_t parent;
    uint32_t incarnation;
    uint64_t view_version;
    uint32_t stream;
    int filter;
    int signal;
    char detail[384];
    uint64_t message;
    int tag;
} tbon_event_t;

typedef struct tbon_node_status {
    tbon_rank_t rank;
    tbon_rank_t parent;
    int role;
    int state;
    double since_s;
    char host[128];
    double rtt_ms;
} tbon_node_status_t;
const char *tbon_node_state_name(int s);
int tbon_fe_status(tbon_net_t *net, tbon_node_status_t *out, size_t cap, int ping_ms);
const char *tbon_net_log_dir(tbon_net_t *net);

typedef struct tbon_perf_stream {
    tbon_rank_t rank;
    uint32_t stream;
    uint64_t up_in_packets, up_in_bytes;
    uint64_t up_out_packets, up_out_bytes;
    uint64_t down_in_packets, down_in_bytes;
    uint64_t down_out_packets, down_out_bytes;
    uint64_t waves;
    uint64_t filter_calls;
    uint64_t filter_ns;
    uint64_t filter_cpu_ns;
    uint64_t queued_bytes;
} tbon_perf_stream_t;
typedef struct tbon_perf_node {
    tbon_rank_t rank;
    int role;
    int alive;
    int answered;
    char host[128];
    uint64_t rss_bytes;
    uint64_t cpu_us;
    uint64_t queued_bytes;
    uint64_t stream_queued_bytes;
    uint64_t link_resends;
    uint64_t relinks;
    uint64_t crc_errors;
    uint64_t uptime_ms;
    uint64_t children;
    uint64_t messages_dropped;
    size_t first_stream, nstreams;
} tbon_perf_node_t;
typedef struct tbon_perf {
    size_t nnodes;
    tbon_perf_node_t *nodes;
    size_t nstreams;
    tbon_perf_stream_t *streams;
    size_t answered;
    size_t silent;
    int rounds;
    double elapsed_ms;
} tbon_perf_t;
int tbon_fe_perf(tbon_net_t *net, tbon_perf_t **out, int timeout_ms);
void tbon_perf_free(tbon_perf_t *perf);

const char *tbon_strerror(int code);
const char *tbon_net_error(const tbon_net_t *net);

tbon_net_t *tbon_fe_create(const char *topology_file, const char *backend_exe,
                           const char *const backend_argv[],
                           const tbon_fe_options_t *opts, tbon_error_t *err);
tbon_net_t *tbon_be_create(int *argc, char ***argv, tbon_error_t *err);
void tbon_net_destroy(tbon_net_t *net);

tbon_rank_t tbon_net_rank(const tbon_net_t *net);
size_t tbon_net_num_backends(tbon_net_t *net);
int tbon_net_backends(tbon_net_t *net, tbon_rank_t *out, size_t cap);
int tbon_net_fd(tbon_net_t *net);

tbon_comm_t *tbon_fe_broadcast_comm(tbon_net_t *net);
tbon_comm_t *tbon_fe_comm_new(tbon_net_t *net, const tbon_rank_t *backends, size_t n);
tbon_stream_t *tbon_fe_stream_new(tbon_net_t *net, tbon_comm_t *comm, int up_filter,
                                  int sync, int down_filter);
int tbon_fe_load_filter(tbon_net_t *net, const char *so_path, const char *func);
tbon_stream_t *tbon_net_stream(tbon_net_t *net, uint32_t id);
uint32_t tbon_stream_id(const tbon_stream_t *s);
int tbon_stream_close(tbon_stream_t *s);

int tbon_net_recv(tbon_net_t *net, tbon_packet_t **pkt, tbon_stream_t **s, int timeout_ms);
int tbon_stream_recv(tbon_stream_t *s, tbon_packet_t **pkt, int timeout_ms);
int tbon_stream_send_packet(tbon_stream_t *s, tbon_packet_t *p);
int tbon_stream_flush(tbon_stream_t *s);
int tbon_net_next_event(tbon_net_t *net, tbon_event_t *ev, int timeout_ms);
int tbon_be_membership_events(tbon_net_t *net, int on);
int tbon_net_send_to(tbon_net_t *net, tbon_rank_t to, int tag, const char *fmt, ...);
int tbon_net_multicast(tbon_net_t *net, const tbon_rank_t *to, size_t n, int tag,
                       const char *fmt, ...);
int tbon_net_broadcast(tbon_net_t *net, int tag, const char *fmt, ...);
int tbon_net_recv_direct(tbon_net_t *net, tbon_rank_t *from, tbon_packet_t **pkt,
                         int timeout_ms);

tbon_packet_t *tbon_packet_new(int tag, const char *fmt, ...);
int tbon_packet_unpack(const tbon_packet_t *p, const char *fmt, ...);
int tbon_packet_tag(const tbon_packet_t *p);
const char *tbon_packet_format(const tbon_packet_t *p);
uint32_t tbon_packet_stream(const tbon_packet_t *p);
tbon_rank_t tbon_packet_source(const tbon_packet_t *p);
size_t tbon_packet_covered(const tbon_packet_t *p, tbon_rank_t *out, size_t cap);
size_t tbon_packet_missing(const tbon_packet_t *p, tbon_rank_t *out, size_t cap);
tbon_packet_t *tbon_packet_ref(tbon_packet_t *p);
void tbon_packet_unref(tbon_packet_t *p);

void free(void *);
"""

SONAME = "libtbon.so.0"


def _candidates():
    """Where libtbon.so may be, first found first taken: $TBON_LIBRARY; the
    build tree this package sits in (python/ beside build/lib/, or
    $TBON_BUILD_DIR); the copy pip put beside the package; the system's
    loader path."""
    env = os.environ.get("TBON_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.environ.get("TBON_BUILD_DIR") or os.path.join(here, "..", "..", "build")
    yield os.path.join(build, "lib", SONAME)
    yield os.path.join(here, "_lib", SONAME)
    found = ctypes.util.find_library("tbon")
    yield found or SONAME


ffi = cffi.FFI()
ffi.cdef(CDEF)


def _open():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (not there)")
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("tbon: cannot load libtbon.so; tried: " + "; ".join(tried) +
                      ". Build it (make) or set TBON_LIBRARY to its path.")


lib, path = _open()
