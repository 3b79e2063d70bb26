/* eds_adopt.c - the EDS's part in recovery (seed 003 V-A, the
 * reconfigurator): its private copy of the topology kept in step with the
 * reactor's reports, the choice of an adopter when the parent is lost, the
 * adoption handshake with it, the event connection to the new parent, and
 * an orderly goodbye to the children. */
#include "ft/eds.h"
#include "ft/eds_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/endian.h"
#include "util/error.h"
#include "util/log.h"
#include "codec/packet_int.h"
#include "topo/reconfig.h"
#include "net/sock.h"

/* ---- fault tolerance: the reconfigurator (seed 003 V-A) ---- */

/* The per-rank arrays follow the topology when back-ends join. */
int tb_eds_grow_seen(tb_eds_t *e, size_t old, size_t n)
{
    uint8_t **v[3] = { &e->data_seen, &e->event_seen, &e->expect };
    for (int i = 0; i < 3; i++) {
        uint8_t *nv = realloc(*v[i], n);
        if (!nv)
            return TBON_ENOMEM;
        memset(nv + old, 0, n - old);
        *v[i] = nv;
    }
    return 0;
}

/* A rank failed in the view is fenced here too: its event connection (a
 * child's; the parent's goes with the adoption the reactor asks for). */
static void fence_events(tb_eds_t *e, tbon_rank_t r)
{
    if (r == e->parent)
        return;
    pthread_mutex_lock(&e->mu);
    watch_t *w = e->all;
    while (w && (w->dead || w->kind != K_EVENT || w->rank != r))
        w = w->next;
    pthread_mutex_unlock(&e->mu);
    if (w)
        tb_eds_drop_watch(e, w);
}

/* The topology's writes are under mu: the adopter thread reads it (its
 * snapshots). */
static void apply_report(tb_eds_t *e, const struct eds_mail *q)
{
    pthread_mutex_lock(&e->mu);
    if (q->kind == TB_EDS_FAILED) {
        tb_report_failure(e->topo, q->r, q->inc);
    } else if (q->kind == TB_EDS_ADOPTED) {
        tb_report_adoption(e->topo, q->r, q->p, q->inc);
    } else if (q->kind == TB_EDS_JOINED) {
        size_t old = tb_topology_size(e->topo);
        int rc = q->r == old ? tb_eds_grow_seen(e, old, old + 1) : 0;
        if (rc == 0)
            rc = tb_report_join(e->topo, q->role, q->r, q->p, q->host, q->lid, q->inc);
        if (rc < 0)
            TB_WARN("eds", "the join of rank %u left out of our copy", q->r);
        if (rc == 1) {
            /* A restarted process connects afresh. */
            e->data_seen[q->r] = e->event_seen[q->r] = e->expect[q->r] = 0;
            if (q->port)
                tb_topology_set_port(e->topo, q->r, (uint16_t)q->port);
        }
    } else if (q->kind == TB_EDS_PORT) {
        tb_topology_set_port(e->topo, q->r, (uint16_t)q->p);
    }
    pthread_mutex_unlock(&e->mu);
    if (q->kind == TB_EDS_FAILED)
        fence_events(e, q->r);
}

static void on_adopter(tb_eds_t *e, struct eds_mail *q);
static void adopt_here(tb_eds_t *e, struct adopt_job *job);
static void detach_children(tb_eds_t *e, struct eds_mail *q);

/* What the reactor sent, in the order it sent it (the loop's drain). An
 * adoption asked for is only noted here: the thread's loop starts it after
 * the batch (eds_thread), never in the middle of another step that
 * applies the reports first. */
void tb_eds_on_mail(void *arg, tb_mail_t *list)
{
    tb_eds_t *e = arg;
    while (list) {
        struct eds_mail *q = (struct eds_mail *)list;
        list = list->next;
        switch (q->what) {
        case M_REPORT:
            apply_report(e, q);
            break;
        case M_EXPECT:
            if (q->r < tb_topology_size(e->topo)) {
                e->expect[q->r] = 1;
                e->event_seen[q->r] = 0;
            }
            break;
        case M_ADOPT:
            e->adopt_want = (int)q->r + 1;
            e->adopt_want_inc = q->inc;
            break;
        case M_FAULT_TAKEN:
            tb_eds_say_fault_taken(e, q->r);
            break;
        case M_DETACH:
            detach_children(e, q);
            break;
        case M_ADOPTED:
        case M_PARENT_EVENTS:
        case M_ADOPT_FAILED:
            on_adopter(e, q);   /* takes q->fd (only these carry one) */
            break;
        }
        free(q->host);
        free(q);
    }
}

/* Apply the reports the reactor queued to the private copy. EDS thread. */
void tb_eds_apply_reports(tb_eds_t *e)
{
    tb_loop_drain(e->loop);
}

/* ---- the adopter thread ----
 * An adoption connects, authenticates and waits for answers, candidate
 * after candidate, for up to seconds: blocking I/O. It runs on a thread of
 * its own, so that the EDS thread goes on beating and watching meanwhile (a
 * thread that sends heartbeats never blocks on I/O: docs/fault-tolerance.md).
 * It works on its own copy of the topology, taken under e->mu, and hands
 * its results to the EDS thread as messages (M_ADOPTED, M_ADOPT_FAILED,
 * M_PARENT_EVENTS; the last of them says last).
 *
 * The thread is started once, by the EDS thread as it starts, and sleeps
 * until a job comes: a parent's death orphans all its children at once, and
 * each of them creating a thread (a stack, a heap of its own at the first
 * allocation) in that burst was about a tenth of the recovery's CPU.
 * Started with the EDS, the creations are spread like the processes' own
 * start; all of them at one moment after the start starved heartbeats under
 * ThreadSanitizer (bench/RESULTS.md, "the adopter thread started ahead" and
 * "recovery on an AMD EPYC KVM guest"). */
struct adopt_job {
    tb_eds_t *e;
    tbon_rank_t lost;
    uint32_t inc;              /* our incarnation once adopted */
    int64_t t0;                /* us: the loss */
    /* The first round's plan, made on the EDS thread from its own copy of
     * the topology (plan_job): the candidates, where they listen, and a
     * connection to the first already under way (fd0, -1: none). The
     * adopter thread then has nothing to look up before it talks to one,
     * and the connection goes out before it is even woken. */
    uint32_t old_height;
    size_t k;
    tbon_rank_t cand[16];
    uint16_t port[16];
    const char *host[16];      /* into hosts */
    char *hosts;               /* the candidates' names, one after another: a
                                  few bytes, not 16 times the longest name (a
                                  job of 4 KB took a fresh heap page in each
                                  orphan: bench/RESULTS.md, "fresh pages") */
    int fd0;
    int fd0_up;                /* fd0 is connected already: no wait for it */
    int reattach;              /* the new FE's claim: it alone, one round */
    int64_t ev_delay;          /* ms before the event connection to the new parent */
    unsigned asked;            /* candidates asked so far */
};

/* A copy of the EDS's topology (any thread; the EDS thread writes it under
 * mu), or NULL. */
static tb_topology_t *snapshot(tb_eds_t *e)
{
    pthread_mutex_lock(&e->mu);
    tb_topology_t *t = tb_topology_clone(e->topo);
    pthread_mutex_unlock(&e->mu);
    return t;
}

/* Where to reach rank c from here: a node on our own topology host over the
 * loopback, as children reach parents at start-up (docs/protocol.md 7.1). */
static const char *host_of(const tb_eds_t *e, const tb_topology_t *t, tbon_rank_t c)
{
    return tb_topology_host_index(t, c) == tb_topology_host_index(t, e->rank)
           ? "127.0.0.1" : tb_topology_host(t, c);
}

/* Ask candidate c, connected on fd, to adopt us: the handshake with purpose
 * ADOPTION, then its TB_CTL_ADOPT_ACK. fd if it did, else -1 (fd closed). */
static int ask(tb_eds_t *e, int fd, tbon_rank_t c, uint32_t inc, int64_t deadline,
               int stall_ms)
{
    tbon_error_t err = { 0 };
    tb_welcome_t w;
    tb_frame_t f;
    uint32_t one = 0;
    int asked = tb_auth_client(fd, &e->session, (uint8_t)e->role, TB_PURPOSE_ADOPTION, e->rank,
                               inc, deadline, &w, &err) == 0;
    if (asked && stall_ms > 0) {
        /* An orphan stopped after it asked, for longer than the answer's
         * wait: when it runs again, it gives up on this candidate, which
         * has taken it all the same (tests only). */
        TB_WARN("adopt", "TBON_TEST_ADOPT_STALL_MS: rank %u's answer left unread for %d ms", c,
                stall_ms);
        struct timespec ts = { stall_ms / 1000, (stall_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
        tb_error_set(&err, TBON_ETIMEOUT, "its answer was not read in time");
        asked = 0;
    }
    if (asked && tb_sock_recv_frame(fd, 4096, &f, deadline, &err) == 0) {
        tb_ctl_msg_t m;
        if (f.hdr.type == TB_FRAME_CONTROL && f.hdr.tag == TB_CTL_ADOPT_ACK &&
            tb_ctl_decode_bytes(TB_CTL_ADOPT_ACK, f.payload, f.hdr.len, &m, NULL) == 0)
            one = m.u.adopt_ack.ok;
        tb_frame_release(&f);
    }
    if (one != 1) {
        TB_INFO("adopt", "rank %u did not adopt us: %s", c, one ? "refused" : err.msg);
        close(fd);
        return TBON_ECLOSED;
    }
    return fd;
}

/* How long after an adoption the event connection to the new parent waits.
 * A parent's death orphans all its children at once, and each of them
 * opening a second connection (connect, handshake, accept) in that burst
 * slows every other orphan's adoption; a dead new parent is still seen
 * meanwhile, by the reactor on the data connection, and a hung one only
 * needs heartbeats well within their timeout. Spread by rank so that the
 * connections do not make a second burst. */
int64_t tb_eds_events_delay(const tb_eds_t *e)
{
    int64_t d = TB_EVENTS_AFTER_ADOPTION_MS;
    int hb = atomic_load(&e->hb_ms);
    if (hb > 0 && d > hb / 4)
        d = hb / 4;
    return d + (int64_t)(e->rank % 16) * (d / 16);
}

/* The same after a new FE's claim (EDS thread): the burst is the FE's
 * children being adopted at once, so the wait grows with their number, to
 * the full delay at 32 (a small tree's sample through a session does not
 * wait 40 ms for it; bench/RESULTS.md, "Issue 33"). */
static int64_t reattach_events_delay(const tb_eds_t *e)
{
    size_t nk = 0, alive = 0;
    const tbon_rank_t *kids = tb_topology_children(e->topo, 0, &nk);
    for (size_t i = 0; i < nk; i++)
        alive += tb_topology_alive(e->topo, kids[i]) != 0;
    int64_t full = tb_eds_events_delay(e);
    return alive >= 32 ? full : full * (int64_t)alive / 32;
}

static void job_mail(tb_eds_t *e, struct eds_mail q)
{
    struct eds_mail *m = malloc(sizeof *m);
    if (!m) {
        if (q.fd >= 0)
            close(q.fd);
        return;         /* the EDS then never hears: it is out of memory anyway */
    }
    *m = q;
    tb_loop_post(e->loop, &m->mail);
}

/* The event connection to the new parent p (seed 003 V-A: "a newly adopted
 * process sends its parent the New Failure Detection Connection protocol
 * message"), after the delay that lets the burst of a recovery pass
 * (tb_eds_events_delay). The fd, or -1 (*gone set if p's port refused the
 * connection: its process has ended since it adopted us). */
static int parent_events(tb_eds_t *e, tbon_rank_t p, const char *host, uint16_t port,
                         uint32_t inc, int *gone)
{
    *gone = 0;
    if (atomic_load(&e->stop) || atomic_load(&e->leaving))
        return TBON_ECLOSED;
    tbon_error_t err;
    tb_welcome_t w;
    int64_t dl = tb_now_ms() + 1000;
    int efd = tb_sock_connect(host, port, dl, &err);
    *gone = efd < 0 && errno == ECONNREFUSED;
    if (efd >= 0 && tb_auth_client(efd, &e->session, (uint8_t)e->role, TB_PURPOSE_EVENT,
                                   e->rank, inc, dl, &w, &err) == 0) {
        tb_sock_nonblock(efd, 1);
        return efd;
    }
    if (efd >= 0)
        close(efd);
    TB_WARN("adopt", "no event connection to the new parent %u: %s%s", p, err.msg,
            *gone ? " (it has ended: looking for another)" : "");
    return TBON_ECLOSED;
}

/* The candidates for job from topology t and its index x (lost's failure
 * applied to t or not yet: tb_adopt_candidates leaves the lost parent and
 * its children out either way), with where each listens. */
static void plan_from(tb_eds_t *e, struct adopt_job *job, const tb_topology_t *t,
                      const tb_adopt_index_t *x)
{
    job->k = x ? tb_adopt_candidates(x, t, e->rank, job->lost, job->old_height, job->cand, 16)
               : 0;
    if (job->k == 0)
        job->cand[job->k++] = 0;    /* no index (out of memory): the FE, the last resort */
    size_t len[16], total = 0;
    for (size_t i = 0; i < job->k; i++) {
        job->host[i] = host_of(e, t, job->cand[i]);
        if (!job->host[i])
            job->host[i] = "";
        len[i] = strlen(job->host[i]) + 1;
        total += len[i];
    }
    char *pool = malloc(total);
    if (!pool) {
        job->k = 0;                 /* nobody this round (out of memory) */
        return;
    }
    free(job->hosts);
    job->hosts = pool;
    for (size_t i = 0; i < job->k; i++) {
        memcpy(pool, job->host[i], len[i]);
        job->host[i] = pool;
        job->port[i] = tb_topology_port(t, job->cand[i]);
        pool += len[i];
    }
}

/* The first round's plan, on the EDS thread (adopt): from its own copy,
 * kept current by the reports it has just applied, and its own index
 * (e->aidx, brought up to date, not built anew): no copy of the topology
 * per orphan. A local first candidate is connected to at once. */
static void plan_job(tb_eds_t *e, struct adopt_job *job)
{
    job->old_height = tb_topology_height(e->topo, e->rank) + 1;
    if (!e->aidx)
        e->aidx = tb_adopt_index_new(e->topo);
    else
        tb_adopt_index_update(e->aidx, e->topo);
    plan_from(e, job, e->topo, e->aidx);
    job->fd0 = -1;
    if (job->k && job->port[0] && strcmp(job->host[0], "127.0.0.1") == 0) {
        tbon_error_t err;
        job->fd0 = tb_sock_connect_begin("127.0.0.1", job->port[0], &job->fd0_up, &err);
        if (job->fd0 < 0) {
            job->fd0 = -1;
            job->port[0] = 0;       /* refused: nobody listens there now */
        }
    }
}

static void job_free(struct adopt_job *job)
{
    if (job && job->fd0 >= 0)
        close(job->fd0);
    if (job)
        free(job->hosts);
    free(job);
}

/* How long an orphan waits for a candidate's connect before it tries the
 * next as well (tb_dial_t), for any one connect at all, and for a connected
 * candidate's handshake and answer. A live host answers a connect from its
 * kernel, busy or not, in well under the first; a host that is down never
 * does. */
#define TB_ADOPT_STAGGER_MS 100
#define TB_ADOPT_CONNECT_MS 1000
#define TB_ADOPT_ANSWER_MS 1000

/* Ask job's candidates in preference order: the index of the one that
 * adopted us (the reactor has the connection, and the EDS the news), or -1
 * if none did. */
static long ask_candidates(tb_eds_t *e, struct adopt_job *job)
{
    int64_t t1 = tb_now_us();
    tb_dial_t d = { .k = job->k, .stagger_ms = TB_ADOPT_STAGGER_MS,
                    .timeout_ms = TB_ADOPT_CONNECT_MS };
    for (size_t i = 0; i < job->k; i++) {
        d.host[i] = job->host[i];
        d.port[i] = job->port[i];
    }
    if (job->fd0 >= 0)
        tb_sock_dial_adopt(&d, 0, job->fd0, job->fd0_up);
    job->fd0 = -1;                  /* the dial has it */
    long got = -1;
    size_t i;
    int fd;
    while (got < 0 && !atomic_load(&e->stop) && (fd = tb_sock_dial_next(&d, &i)) >= 0) {
        fd = ask(e, fd, job->cand[i], job->inc, tb_now_ms() + TB_ADOPT_ANSWER_MS,
                 job->asked++ || job->reattach ? 0 : e->adopt_stall_ms);
        if (fd < 0)
            continue;
        int64_t t2 = tb_now_us();
        /* The EDS hears first (its parent, its incarnation: the reactor's
         * reports after the graft come after this mail), then the reactor
         * gets the connection from here: from the adopter thread, the EDS
         * thread is not woken on the way (one hand-off less per orphan). */
        struct eds_mail q = { .what = M_ADOPTED, .fd = -1, .p = job->cand[i], .r = job->lost };
        if (e->role == TB_ROLE_BE)
            on_adopter(e, &q);      /* adopt_here: the EDS thread, no mail to ourselves */
        else
            job_mail(e, q);
        tb_cmd_t *c = tb_cmd_adopted(fd, job->cand[i], job->lost, (uint64_t)(t1 - job->t0),
                                     (uint64_t)(t2 - t1));
        if (c)
            tb_node_post(e->node, c);
        else
            close(fd);
        got = (long)i;
    }
    tb_sock_dial_end(&d);
    return got;
}

/* The rounds of an adoption: the first with the EDS's plan (plan_job); a
 * round that finds nobody is tried again, after a pause, with a copy of
 * what the reports have taught us meanwhile (the FE being the last
 * resort). The index of the candidate that adopted us, or -1. */
static long adopt_rounds(struct adopt_job *job)
{
    tb_eds_t *e = job->e;
    tb_topology_t *t = NULL;
    tb_adopt_index_t *aidx = NULL;
    long got = -1;
    int rounds = job->reattach ? 1 : 4;
    if (e->adopt_delay_ms > 0 && !job->reattach) {
        /* a slow adoption, made for the tests (a starved machine's) */
        TB_WARN("adopt", "TBON_TEST_ADOPT_DELAY_MS: asking for an adopter in %d ms",
                e->adopt_delay_ms);
        struct timespec ts = { e->adopt_delay_ms / 1000, (e->adopt_delay_ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    for (int round = 0; got < 0 && round < rounds && !atomic_load(&e->stop); round++) {
        if (round > 0) {
            struct timespec ts = { 0, 40000000L * round };
            nanosleep(&ts, NULL);
            tb_topology_t *fresh = snapshot(e);
            if (fresh) {
                tb_topology_destroy(t);
                t = fresh;
            }
            if (!t)
                break;
            tb_report_failure(t, job->lost, tb_topology_incarnation(t, job->lost));
            if (!aidx)
                aidx = tb_adopt_index_new(t);
            else
                tb_adopt_index_update(aidx, t);
            plan_from(e, job, t, aidx);
        }
        got = ask_candidates(e, job);
    }
    tb_adopt_index_destroy(aidx);
    tb_topology_destroy(t);
    return got;
}

/* Our parent is gone: find a new one (seed 003 V-A, "Dynamic Topology
 * Configuration"), on the adopter thread; then, after the delay that lets
 * the recovery's burst pass (tb_eds_events_delay), the event connection to
 * the new parent. */
static void run_job(struct adopt_job *job)
{
    tb_eds_t *e = job->e;
    long i = adopt_rounds(job);
    if (i < 0) {
        job_mail(e, (struct eds_mail){ .what = M_ADOPT_FAILED, .fd = -1, .r = job->lost,
                                       .last = 1 });
        return;
    }
    struct timespec ts = { job->ev_delay / 1000, (job->ev_delay % 1000) * 1000000L };
    nanosleep(&ts, NULL);
    int gone;
    int efd = parent_events(e, job->cand[i], job->host[i], job->port[i], job->inc, &gone);
    job_mail(e, (struct eds_mail){ .what = M_PARENT_EVENTS, .fd = efd, .p = job->cand[i],
                                   .last = 1, .gone = gone });
}

static void *adopter_thread(void *arg)
{
    pthread_setname_np(pthread_self(), "tbon-adopt");
    tb_eds_t *e = arg;
    /* Its heap now, not in the burst (as the EDS thread does). */
    void *volatile warm = malloc(64);
    free(warm);
    pthread_mutex_lock(&e->amu);
    for (;;) {
        while (!e->job && !atomic_load(&e->stop))
            pthread_cond_wait(&e->acv, &e->amu);
        if (!e->job)
            break;              /* stopping, and nothing to do */
        struct adopt_job *job = e->job;
        e->job = NULL;
        pthread_mutex_unlock(&e->amu);
        run_job(job);
        job_free(job);
        pthread_mutex_lock(&e->amu);
    }
    pthread_mutex_unlock(&e->amu);
    return NULL;
}

int tb_eds_start_adopter(tb_eds_t *e)
{
    if (e->adopter_up)
        return 0;
    if (pthread_create(&e->adopter, NULL, adopter_thread, e) != 0)
        return TBON_ENOMEM;
    e->adopter_up = 1;
    return 0;
}

/* The event connection to the new parent, once its delay is over (the
 * timer adopt_here set; EDS thread). */
static void on_events_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    tb_eds_t *e = t->arg;
    int gone;
    int efd = parent_events(e, e->ev_p, e->ev_host, e->ev_port, e->ev_inc, &gone);
    struct eds_mail q = { .what = M_PARENT_EVENTS, .fd = efd, .p = e->ev_p, .last = 1,
                          .gone = gone };
    on_adopter(e, &q);
}

/* A back-end adopts on the EDS thread itself: without a parent it has
 * nobody to beat for (it has no children), and its EDS thread is already
 * running when the loss is seen, where an adopter thread must first be
 * woken, and under a recovery's load wait its turn (1.2-2.8 ms per orphan
 * at fan-out 16 to 128, bench/RESULTS.md). The event connection follows
 * from a timer of the EDS's loop, not a sleep. A commnode keeps beating
 * for its children meanwhile: the adopter thread does its adoptions. */
static void adopt_here(tb_eds_t *e, struct adopt_job *job)
{
    e->adopting = 1;
    long i = adopt_rounds(job);
    if (i < 0) {
        struct eds_mail q = { .what = M_ADOPT_FAILED, .fd = -1, .r = job->lost, .last = 1 };
        job_free(job);
        on_adopter(e, &q);
        return;
    }
    e->ev_p = job->cand[i];
    e->ev_port = job->port[i];
    e->ev_inc = job->inc;
    snprintf(e->ev_host, sizeof e->ev_host, "%s", job->host[i]);
    job_free(job);
    if (!tb_timer_armed(&e->ev_timer))
        e->ev_timer = (tb_timer_t){ .fn = on_events_timer, .arg = e };
    if (tb_timer_at(e->loop, &e->ev_timer, tb_now_ms() + tb_eds_events_delay(e)) != 0)
        on_events_timer(&e->ev_timer, tb_now_ms());     /* no timer: open it now */
}

/* Give the adopter thread the loss of lost (EDS thread). */
static void adopt(tb_eds_t *e, tbon_rank_t lost)
{
    tb_eds_apply_reports(e);
    struct adopt_job *job = malloc(sizeof *job);
    if (job) {
        *job = (struct adopt_job){ .e = e, .lost = lost, .inc = e->incarnation + 1,
                                   .t0 = tb_now_us(), .fd0 = -1,
                                   .ev_delay = tb_eds_events_delay(e) };
        plan_job(e, job);
        e->adopt_inc = job->inc;
    }
    if (job && e->role == TB_ROLE_BE) {
        adopt_here(e, job);
        return;
    }
    /* Not started with the EDS (out of resources then): now. */
    if (!job || tb_eds_start_adopter(e) != 0) {
        job_free(job);
        TB_WARN("adopt", "cannot start the adopter thread after the loss of rank %u; leaving",
                lost);
        tb_eds_post(e, tb_cmd_adopt_failed(lost));
        tb_node_parent_gone(e->node, lost);
        return;
    }
    pthread_mutex_lock(&e->amu);
    e->job = job;
    pthread_cond_signal(&e->acv);
    pthread_mutex_unlock(&e->amu);
    e->adopting = 1;
}

/* What the adopter thread found (EDS thread, from the mailbox). */
static void on_adopter(tb_eds_t *e, struct eds_mail *q)
{
    if (q->last)
        e->adopting = 0;        /* it waits for the next job */
    if (atomic_load(&e->stop)) {
        if (q->fd >= 0)
            close(q->fd);
        q->fd = -1;
        return;
    }
    switch (q->what) {
    case M_ADOPTED:
        /* lost (q->r): the parent it replaces; the adopter thread has
         * given the reactor the connection (run_job) */
        e->parent = q->p;
        e->incarnation++;
        if (atomic_exchange(&e->headless, 0)) {
            tb_timer_cancel(e->loop, &e->hold_timer);
            TB_INFO("ft", "a new front-end took us: the session goes on");
        }
        break;
    case M_PARENT_EVENTS:
        while (e->ngrave > 0)           /* the lost parent's, closed now */
            close(e->grave[--e->ngrave]);
        if (q->fd >= 0 && (q->p != e->parent || atomic_load(&e->leaving) ||
                           !tb_eds_add_watch(e, K_EVENT, q->fd, EPOLLIN, q->p, 0)))
            close(q->fd);
        q->fd = -1;
        /* An adopter that died right after adopting us (several nodes killed
         * at once): lost as if its event connection had ended, now, rather
         * than when the data link gives up on it (TBON_RELINK_MS), by which
         * time the FE has taken us for failed. */
        if (q->gone && q->p == e->parent && atomic_load(&e->ft_ready) &&
            !atomic_load(&e->leaving)) {
            tb_eds_parent_down(e, q->p);
        }
        break;
    case M_ADOPT_FAILED:
        e->adopt_inc = 0;
        if (q->r == 0 && atomic_load(&e->headless)) {
            TB_WARN("adopt", "the new front-end did not take us: waiting for another");
            break;
        }
        TB_WARN("adopt", "no node would adopt us after the loss of rank %u; leaving", q->r);
        tb_eds_post(e, tb_cmd_adopt_failed(q->r));
        tb_node_parent_gone(e->node, q->r);
        break;
    default:
        break;
    }
    if (q->fd >= 0)             /* not taken above */
        close(q->fd);
    q->fd = -1;
    if (!e->adopting && e->adopt_next) {
        tbon_rank_t lost = (tbon_rank_t)(e->adopt_next - 1);
        e->adopt_next = 0;
        if (e->parent == TBON_RANK_NONE && !atomic_load(&e->leaving))
            adopt(e, lost);
        else if (lost == 0 && e->parent == 0 && !atomic_load(&e->leaving))
            tb_eds_parent_down(e, 0);   /* the new FE's loss, held back above */
    }
}

/* Wake the adopter thread, if one waits, to look at e->stop (set). Any
 * thread: one that is not started yet sees e->stop when it starts. */
void tb_eds_wake_adopter(tb_eds_t *e)
{
    pthread_mutex_lock(&e->amu);
    pthread_cond_broadcast(&e->acv);
    pthread_mutex_unlock(&e->amu);
}

/* End the adopter thread, if one runs (tb_eds_stop, e->stop set and the
 * thread woken): a job under way ends at its next look at e->stop. */
void tb_eds_join_adopter(tb_eds_t *e)
{
    if (!e->adopter_up)
        return;
    tb_eds_wake_adopter(e);
    pthread_join(e->adopter, NULL);
    e->adopter_up = 0;
    e->adopting = 0;
    job_free(e->job);   /* given but never taken */
    e->job = NULL;
}

/* Whether the FE, our parent, is known gone (not fencing us): its event
 * connection's end read here without TB_EVENT_FENCED, or waiting in it with
 * nothing before it, or no such connection left (an adopter FE that refused
 * it). Unread bytes before the end, or an open connection (a broken data
 * link only): not known, and the FE is asked as any adopter would be. */
static int fe_end_seen(tb_eds_t *e)
{
    if (atomic_load(&e->fe_gone))
        return 1;
    if (e->fenced)
        return 0;
    unsigned long long v = atomic_load(&e->parent_watch);  /* the FE's, if watched */
    if (v >> 32 != 1)
        return 1;
    /* What it said before its end is read now: a detach ('D'), or our
     * fencing ('X'), may wait there unread. */
    pthread_mutex_lock(&e->mu);
    watch_t *w = e->all;
    while (w && (w->dead || w->kind != K_EVENT || w->fd != (int)(uint32_t)v))
        w = w->next;
    pthread_mutex_unlock(&e->mu);
    uint8_t buf[512];
    ssize_t n;
    while (w && (n = recv(w->fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        int said = tb_eds_scan_events(e, w, buf, (size_t)n);
        if (said > 0 && (said & 2))
            e->fenced = 1;
        if (said < 0 || e->fenced)
            return 0;
    }
    if (!w)
        return 1;
    if (n == 0)
        return 1;
    return e->detached;     /* it said so: its end is on its way */
}

/* The parent's event connection ended, or the reactor saw the parent go. */
void tb_eds_parent_down(tb_eds_t *e, tbon_rank_t lost)
{
    if (lost == 0 && atomic_load(&e->headless))
        return;            /* the FE is gone; we wait for a new one (eds_fe.c) */
    if (lost != e->parent)
        return;            /* an old parent, already replaced */
    if (lost == 0 && e->adopting) {
        /* A new FE took us and the event connection to it is still being
         * opened: what waits there (its detach, say) decides once it is
         * watched (on_event_conn), not the missing watch now. */
        e->adopt_next = 1;
        return;
    }
    if (lost == 0 && fe_end_seen(e) && tb_eds_fe_end(e)) {
        /* It detached, or has a grace: no adoption, the reactor an orphan
         * meanwhile (it asked for this, or hears it now). */
        pthread_mutex_lock(&e->mu);
        watch_t *w = e->all;
        while (w && (w->dead || w->kind != K_EVENT || w->rank != 0))
            w = w->next;
        pthread_mutex_unlock(&e->mu);
        if (w)
            tb_eds_drop_watch(e, w);
        tb_eds_post(e, tb_cmd_peer_lost(0));
        return;
    }
    if (lost == 0 && fe_end_seen(e)) {
        /* Nobody takes the FE's place: the reactor leaves, an orphan already
         * (its ADOPT_FAILED) or not yet (tb_recovery_parent_lost, when it
         * reads the PEER_LOST), and the application hears now. */
        atomic_store(&e->fe_gone, 1);
        atomic_store(&e->gone_parent, lost + 1);
        tb_eds_post(e, tb_cmd_adopt_failed(lost));
        tb_eds_post(e, tb_cmd_peer_lost(lost));
        tb_node_parent_gone(e->node, lost);
        return;
    }
    atomic_store(&e->gone_parent, lost + 1);
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next)
        if (!w->dead && w->kind == K_EVENT && w->rank == lost) {
            pthread_mutex_unlock(&e->mu);
            tb_eds_drop_watch(e, w);
            pthread_mutex_lock(&e->mu);
        }
    pthread_mutex_unlock(&e->mu);
    e->parent = TBON_RANK_NONE;
    /* One adopter thread at a time: a new parent lost while the thread
     * still opens its event connection is adopted for when it is done. */
    if (e->adopting)
        e->adopt_next = (int)lost + 1;
    else
        adopt(e, lost);
}

/* Queue a message (host taken over) for the EDS thread; wake: wake it for
 * it, else it is applied when the EDS next needs the topology (a report
 * costs the reactor no thread switch). */
static void send_mail(tb_eds_t *e, struct eds_mail q, int wake)
{
    struct eds_mail *m = malloc(sizeof *m);
    if (!m) {
        TB_WARN("eds", "out of memory: a report for rank %u lost", q.r);
        free(q.host);
        return;
    }
    *m = q;
    if (wake)
        tb_loop_post(e->loop, &m->mail);
    else
        tb_loop_queue(e->loop, &m->mail);
}

void tb_eds_report(tb_eds_t *e, tb_eds_rep_kind_t kind, tbon_rank_t r, tbon_rank_t p,
                   uint32_t inc, int wake)
{
    if (!e)
        return;
    send_mail(e, (struct eds_mail){ .what = M_REPORT, .kind = kind, .r = r, .p = p, .inc = inc,
                                    .role = TB_ROLE_BE }, wake);
}

void tb_eds_join(tb_eds_t *e, const tb_vchange_t *c)
{
    if (!e)
        return;
    char *h = strdup(c->host);
    if (h)
        send_mail(e, (struct eds_mail){ .what = M_REPORT, .kind = TB_EDS_JOINED, .r = c->rank,
                                        .p = c->parent, .inc = c->inc, .host = h, .lid = c->lid,
                                        .port = c->port,
                                        .role = c->kind == TB_V_JOIN_CN ? TB_ROLE_COMMNODE
                                                                        : TB_ROLE_BE }, 0);
}

/* Tell every child on its event connection that we leave in order. */
void tb_eds_say_bye(tb_eds_t *e)
{
    e->bye_sent = 1;
    const char bye = TB_EVENT_BYE;
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next)
        if (!w->dead && w->kind == K_EVENT && w->rank != e->parent &&
            send(w->fd, &bye, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
            TB_DEBUG("eds", "no goodbye to rank %u: %s", w->rank, strerror(errno));
    pthread_mutex_unlock(&e->mu);
}

void tb_eds_leave(tb_eds_t *e)
{
    if (!e)
        return;
    /* The goodbye to the children (tb_eds_say_bye) waits for the thread's
     * end: they are told before their connections end, and only those
     * still there. Said here, as the end began, it woke every child's EDS
     * once more (the bye, then its own end) while the SHUTDOWN behind it
     * ended the child anyway: at 32x32, 1,024 thread switches more per
     * teardown than 93e5160's. The thread reads the flag where it matters:
     * no wake-up. */
    atomic_store(&e->leaving, 1);
}

void tb_eds_set_verdicts(tb_eds_t *e, int on)
{
    if (e)
        atomic_store(&e->verdicts, on);
}

void tb_eds_set_ft_ready(tb_eds_t *e)
{
    if (!e)
        return;
    atomic_store(&e->ft_ready, 1);
}

void tb_eds_request_adoption(tb_eds_t *e, tbon_rank_t lost, uint32_t inc)
{
    if (!e)
        return;         /* given links (node.h): the caller hands the adopter in */
    send_mail(e, (struct eds_mail){ .what = M_ADOPT, .r = lost, .inc = inc }, 1);
}

/* Queued, not woken for: admit() applies it before it looks at a peer. */
void tb_eds_fault_taken(tb_eds_t *e, tbon_rank_t rank)
{
    if (!e)
        return;
    send_mail(e, (struct eds_mail){ .what = M_FAULT_TAKEN, .r = rank }, 1);
}

void tb_eds_expect(tb_eds_t *e, tbon_rank_t rank)
{
    if (!e)
        return;
    send_mail(e, (struct eds_mail){ .what = M_EXPECT, .r = rank }, 0);
}

/* A new FE's claim said where it listens (eds_fe.c): be adopted by it, in
 * one round (nobody else can take its place). */
void tb_eds_adopt_to(tb_eds_t *e, const char *host, uint16_t port)
{
    struct adopt_job *job = calloc(1, sizeof *job);
    char *h = strdup(host);
    if (!job || !h || e->adopting || atomic_load(&e->leaving)) {
        free(job);
        free(h);
        return;
    }
    *job = (struct adopt_job){ .e = e, .lost = 0, .inc = e->incarnation + 1, .t0 = tb_now_us(),
                               .fd0 = -1, .reattach = 1, .k = 1, .hosts = h,
                               .ev_delay = reattach_events_delay(e) };
    job->cand[0] = 0;
    job->host[0] = h;
    job->port[0] = port;
    e->adopt_inc = job->inc;
    TB_INFO("ft", "the new front-end listens at %s port %u: asking it to adopt us", host,
            (unsigned)port);
    if (tb_eds_start_adopter(e) != 0) {
        job_free(job);
        return;
    }
    pthread_mutex_lock(&e->amu);
    job_free(e->job);
    e->job = job;
    pthread_cond_signal(&e->acv);
    pthread_mutex_unlock(&e->amu);
    e->adopting = 1;
}

/* FE, EDS thread: tell every child we detach ('D' and how long the tree
 * waits), then let their connections close without a word of fencing. */
static int events_of_all_children(tb_eds_t *e)
{
    size_t nk;
    const tbon_rank_t *kids = tb_topology_children(e->topo, e->rank, &nk);
    for (size_t i = 0; i < nk; i++) {
        if (!tb_topology_alive(e->topo, kids[i]))
            continue;
        watch_t *w = e->all;
        while (w && (w->dead || w->kind != K_EVENT || w->rank != kids[i]))
            w = w->next;
        if (!w)
            return 0;
    }
    return 1;
}

static void on_detach_timer(tb_timer_t *t, int64_t now)
{
    (void)now;
    struct eds_mail q = { .what = M_DETACH, .port = ((tb_eds_t *)t->arg)->detach_hold };
    detach_children(t->arg, &q);
}

/* A child adopted a moment ago opens its event connection after a delay
 * (tb_eds_events_delay): the detach waits for it (at most a second), or it
 * would never hear the 'D' and take the FE's end for the session's. */
static void detach_children(tb_eds_t *e, struct eds_mail *q)
{
    uint8_t b[5] = { TB_EVENT_DETACH };
    tb_put32(b + 1, q->port);
    tb_eds_apply_reports(e);
    if (!e->detach_until)
        e->detach_until = tb_now_ms() + 1000;
    if (!events_of_all_children(e) && tb_now_ms() < e->detach_until) {
        e->detach_hold = q->port;
        e->detach_timer = (tb_timer_t){ .fn = on_detach_timer, .arg = e };
        tb_timer_at(e->loop, &e->detach_timer, tb_now_ms() + 10);
        return;
    }
    atomic_store(&e->detaching, 1);
    pthread_mutex_lock(&e->mu);
    for (watch_t *w = e->all; w; w = w->next)
        if (!w->dead && w->kind == K_EVENT)
            (void)!send(w->fd, b, sizeof b, MSG_DONTWAIT | MSG_NOSIGNAL);
    e->detach_done = 1;
    pthread_cond_broadcast(&e->dcv);
    pthread_mutex_unlock(&e->mu);
}

int tb_eds_detach(tb_eds_t *e, uint32_t hold_ms)
{
    if (!e)
        return TBON_EINVAL;
    struct eds_mail *m = malloc(sizeof *m);
    if (!m)
        return TBON_ENOMEM;
    *m = (struct eds_mail){ .what = M_DETACH, .port = hold_ms, .fd = -1 };
    tb_loop_post(e->loop, &m->mail);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (!e->detach_done && rc == 0)
        rc = pthread_cond_timedwait(&e->dcv, &e->mu, &ts);
    int done = e->detach_done;
    pthread_mutex_unlock(&e->mu);
    return done ? 0 : TBON_ETIMEOUT;
}
