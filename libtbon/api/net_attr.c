/* net_attr.c - the front-end's replicas of every node's attributes
 * (docs/user-guide.md, "Attributes"): made on first use, marked changed for
 * tbon_fe_attrs_changed. Under net->mu; called by the API calls (net.c,
 * fe.c) and by the node's callbacks (net_cb.c). */
#include "api/net_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/attrs.h"

/* FE: the replica of rank r's attributes, made if make (under net->mu). */
tb_attrs_t *tb_net_replica(tbon_net_t *net, tbon_rank_t r, int make)
{
    if (r >= net->nrep) {
        if (!make)
            return NULL;
        size_t nc = net->nrep ? net->nrep : 64;
        while (nc <= r)
            nc *= 2;
        tb_attrs_t **nv = realloc(net->rep, nc * sizeof *nv);
        if (!nv)
            return NULL;
        net->rep = nv;
        uint8_t *nchg = realloc(net->chg, nc);
        if (!nchg)
            return NULL;
        net->chg = nchg;
        memset(net->rep + net->nrep, 0, (nc - net->nrep) * sizeof *nv);
        memset(net->chg + net->nrep, 0, nc - net->nrep);
        net->nrep = nc;
    }
    if (!net->rep[r] && make)
        net->rep[r] = tb_attrs_new();
    return net->rep[r];
}

void tb_net_attrs_changed_locked(tbon_net_t *net, tbon_rank_t r)
{
    if (r < net->nrep && !net->chg[r]) {
        net->chg[r] = 1;
        net->nchg++;
    }
    pthread_cond_broadcast(&net->cond);
}
