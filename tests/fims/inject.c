/* inject.c - one schedule item carried out: its victims chosen
 * (scenarios.c), killed on their hosts back to back (hosts.c), its orphans
 * noted, and a line saying what was done. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tbon/tbon.h>

#include "fims.h"

static void print_ranks(FILE *f, const tbon_rank_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%u", i ? "," : "", (unsigned)r[i]);
    if (!n)
        fprintf(f, "-");
}

/* Kill victims [from, to) of in: one command per host, "kill R...", to its
 * agent (on this host it runs at once), every host's before any answer is
 * read, so that "at once" means back to back everywhere; then the answers:
 * the pid each victim had, or why none was killed. kill_us is when the
 * command left. */
static void kill_victims(struct injection *in, size_t from, size_t to)
{
    size_t hs[MAX_VICTIMS], nh = 0;
    int sent[MAX_VICTIMS] = { 0 };
    for (size_t k = from; k < to; k++) {
        size_t h = host_of[in->victim[k]], j = 0;
        while (j < nh && hs[j] != h)
            j++;
        if (j == nh)
            hs[nh++] = h;
    }
    for (size_t j = 0; j < nh; j++) {
        struct host *h = &hosts[hs[j]];
        char cmd[MAX_VICTIMS * 12 + 8];
        size_t o = (size_t)snprintf(cmd, sizeof cmd, "kill");
        for (size_t k = from; k < to; k++)
            if (host_of[in->victim[k]] == hs[j])
                o += (size_t)snprintf(cmd + o, sizeof cmd - o, " %u", (unsigned)in->victim[k]);
        int64_t t = now_us();
        sent[j] = host_send(h, cmd) == 0;
        for (size_t k = from; k < to; k++)
            if (host_of[in->victim[k]] == hs[j]) {
                in->where[k] = !h->local;
                in->kill_us[k] = t;
                if (!sent[j])
                    snprintf(in->miss[k], sizeof in->miss[k], "%.90s", h->why);
            }
    }
    for (size_t j = 0; j < nh; j++) {
        if (!sent[j])
            continue;
        struct host *h = &hosts[hs[j]];
        char *r = host_reply(h, now_us() + 10 * 1000000LL);
        for (size_t k = from; k < to; k++) {
            if (host_of[in->victim[k]] != hs[j])
                continue;
            if (!r) {
                snprintf(in->miss[k], sizeof in->miss[k], "%.90s", h->why);
                continue;
            }
            snprintf(in->miss[k], sizeof in->miss[k], "no process of rank %u there",
                     (unsigned)in->victim[k]);
            for (const char *c = r; *c; c += strcspn(c, "\n") + (c[strcspn(c, "\n")] != 0)) {
                unsigned rr;
                long pid;
                if (sscanf(c, "%u %ld", &rr, &pid) == 2 && rr == in->victim[k] && pid > 0) {
                    in->pid[k] = (pid_t)pid;
                    in->miss[k][0] = '\0';
                    break;
                }
            }
        }
        free(r);
    }
}

/* Kill the victims of one schedule item; t0 is the run's start. The lock is
 * not held while the agents are asked (the events go on meanwhile). */
void inject(const struct item *it, int64_t t0)
{
    pthread_mutex_lock(&fe.mu);
    struct injection *ni = realloc(fe.inj, (fe.ninj + 1) * sizeof *ni);
    if (!ni) {
        pthread_mutex_unlock(&fe.mu);
        return;
    }
    fe.inj = ni;
    struct injection *in = &fe.inj[fe.ninj];
    memset(in, 0, sizeof *in);
    in->item = it;
    size_t idx = fe.ninj++;
    if (choose_victims(in) != 0)
        in->skipped = 1;
    for (size_t k = 0; k < in->nv; k++)
        fe.killed[in->victim[k]] = 1;
    /* The adopter's children are orphans of this injection too, including
     * the first orphan if it is already adopted when the adopter dies. */
    size_t nfirst = it->kind == K_ADOPTER ? 1 : in->nv;
    for (size_t k = 0; k < in->nv; k++)
        add_orphans(in, in->victim[k]);
    struct injection mine = *in;    /* fe.inj may move while unlocked */
    pthread_mutex_unlock(&fe.mu);
    kill_victims(&mine, 0, nfirst);
    if (nfirst < mine.nv) {
        sleep_until_us(mine.kill_us[0] + ADOPTER_DELAY_MS * 1000);
        kill_victims(&mine, nfirst, mine.nv);
    }
    pthread_mutex_lock(&fe.mu);
    in = &fe.inj[idx];
    memcpy(in->pid, mine.pid, sizeof in->pid);
    memcpy(in->where, mine.where, sizeof in->where);
    memcpy(in->miss, mine.miss, sizeof in->miss);
    memcpy(in->kill_us, mine.kill_us, sizeof in->kill_us);
    if (nfirst < in->nv)
        add_orphans(in, in->victim[1]);   /* what it adopted meanwhile */
    printf("t=%.3f s: injection %zu (%s): ", (double)(now_us() - t0) / 1e6, idx + 1, it->text);
    if (in->skipped) {
        printf("nothing killed: %s\n", in->note);
    } else {
        for (size_t k = 0; k < in->nv; k++) {
            const char *hn = hosts[host_of[in->victim[k]]].name;
            if (in->pid[k])
                printf("%skilled commnode %u on %s (pid %d%s)", k ? ", " : "",
                       (unsigned)in->victim[k], hn, (int)in->pid[k],
                       in->where[k] ? ", through its agent" : "");
            else
                printf("%scommnode %u on %s not killed: %s", k ? ", " : "",
                       (unsigned)in->victim[k], hn, in->miss[k]);
        }
        printf("; orphans ");
        print_ranks(stdout, in->orphan, in->norph);
        printf("%s%s\n", in->note[0] ? "; " : "", in->note);
    }
    fflush(stdout);
    pthread_mutex_unlock(&fe.mu);
}
