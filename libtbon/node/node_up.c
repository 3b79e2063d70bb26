/* node_up.c - a wave's packets sent up: to the parent (kept for an
 * adoption on an exact stream, handed to ft while the node is an orphan),
 * or at the FE to the application. Called by the waves (node_wave.c), the
 * mailbox (node.c) and recovery; calls down to the streams, exactness,
 * coverage and the connections only. */
#include "node/node_int.h"
#include "util/hot.h"

#include "codec/packet_int.h"

TB_HOT void tb_node_to_parent(tb_node_t *n, uint32_t stream, tbon_packet_t *p, int more, uint64_t key)
{
    if (!p)
        return;
    tb_stream_st_t *s = stream < n->nstreams ? n->streams[stream] : NULL;
    if (s)
        TB_PERF_PKT(s, TB_PERF_S_UP_OUT, p);
    tbon_rank_t src = tbon_packet_source(p);
    if (src == TBON_RANK_NONE)
        src = n->rank;
    if (n->role == TB_ROLE_FE) {
        /* The FE's upstream output is the application's input. */
        tbon_packet_t *orig = p;
        if (tbon_packet_source(p) == TBON_RANK_NONE || tbon_packet_stream(p) != stream) {
            size_t len;
            const uint8_t *pl = tb_packet_payload(p, &len);
            p = tb_packet_decode(pl, len, tbon_packet_tag(p), stream, src, NULL);
        } else {
            tbon_packet_ref(p);
        }
        if (p && p != orig)
            tb_ranks_copy(tb_packet_cover_mut(p), tb_packet_cover(orig));
        tbon_packet_unref(orig);
        if (p)
            tb_cover_deliver(n, stream, p, key >> 24);
        if (p && n->cbs.deliver)
            n->cbs.deliver(n->cbs.arg, stream, p, key >> 24);   /* the wave's request */
        else
            tbon_packet_unref(p);
        return;
    }
    if (!more)
        tb_stream_sent(n, stream, key);
    if (s && s->exact && n->ft->ready(n))
        tb_exact_retain(n, s, p, more, key);       /* for an adoption (node_exact.c) */
    if (n->parent && !n->parent->closed) {
        if (tb_conn_send_packet_key(n->parent, TB_FRAME_DATA,
                                    (more ? TB_FRAME_F_MORE : 0) | TB_FRAME_F_COVER, stream,
                                    tbon_packet_tag(p), src, key, p) == TBON_ETOOBIG)
            tb_node_too_big(stream, p, n->parent->rank);
        tb_dlog_ride(n);
    } else if (tb_node_ft(n, (tb_ft_event_t){ .kind = TB_FT_EV_ORPHAN_UP,
                                              .u.up = { stream, p, more, key } })) {
        return;     /* an orphan's: it goes to the adopter */
    }
    tbon_packet_unref(p);
}
