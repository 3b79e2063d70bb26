/* st_proto.h - the messages between tbon_stat's front-end and its back-ends
 * (tags from TBON_FIRST_APP_TAG, tbon packet formats). The front-end asks
 * which tasks each back-end has (TAG_DISCOVER, answered with FMT_FOUND),
 * then broadcasts the request (TAG_SAMPLE, FMT_REQ) and merges the 2D and
 * 3D trees that come up (FMT_TREES); TAG_RESEND asks again for what a
 * failure lost. */
#ifndef TBON_ST_PROTO_H
#define TBON_ST_PROTO_H

#include <tbon/tbon.h>

#define TAG_SAMPLE (TBON_FIRST_APP_TAG)
#define TAG_RESEND (TBON_FIRST_APP_TAG + 1)
/* pids, their task numbers, their back-ends, samples, interval, flags, round
 * (0 for TAG_SAMPLE, counting up with each TAG_RESEND) */
#define FMT_REQ    "%ad %aud %aud %ud %ud %ud %ud"
#define FMT_TREES  "%auc %auc"
#define TAG_DISCOVER (TBON_FIRST_APP_TAG + 2)
/* job (0: the pids given), steps (none: all), pids, their back-ends */
#define FMT_DISCOVER "%ud %aud %ad %aud"
/* back-end, pids, ranks, sizes, steps, states (FOUND_*), an executable, a note */
#define FMT_FOUND  "%ud %ad %ad %ad %aud %aud %s %s"
#define FOUND_OK   0u
#define FOUND_GONE 1u
/* The request's flags (FMT_REQ's last field). */
#define FLAG_THREADS 1u
#define FLAG_LINES   2u
#define FLAG_MODULES 4u
#define FLAG_COUNTS  8u    /* --counts-only: counts-only trees (st_ptree.h) */

#endif
