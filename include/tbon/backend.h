/* backend.h - the back-end API: join the tree a front-end launched */
#ifndef TBON_BACKEND_H
#define TBON_BACKEND_H

#include <tbon/net.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Join the tree as the back-end the launcher started: reads and removes the
 * launcher's arguments (--tbon-...) from argc and argv, so the application sees
 * only its own. Returns when connected, or NULL with err filled. */
tbon_net_t  *tbon_be_create(int *argc, char ***argv, tbon_error_t *err);

/* Join as back-end `rank` of a tree started in attach mode, through the attach
 * file the front-end wrote. With rank TBON_RANK_NONE, join a running tree as
 * a new back-end: the front-end gives it the next rank and a parent, and
 * gets TBON_EV_NODE_JOINED once it is connected (docs/user-guide.md,
 * "Membership"). A rank that is not waiting for its attach (it failed while
 * the tree ran) comes back as a restarted process: the front-end takes it
 * back at the next incarnation generation, once it has seen it fail.
 * Returns when connected, or NULL with err filled. */
tbon_net_t  *tbon_be_attach(const char *attach_file, tbon_rank_t rank, tbon_error_t *err);

/* Membership events at this back-end (docs/user-guide.md, "Membership"):
 * with on, tbon_net_next_event gives from now on the changes of every view
 * this process applies - TBON_EV_NODE_FAILED, NODE_ADOPTED (parent: the
 * adopter), NODE_JOINED and NODE_LEFT, each with view_version the version
 * that carried it, in the order of the versions: the same changes the
 * front-end's view has. Off by default (nothing is kept then); costs no
 * message either way: views reach every process already. 0, or
 * TBON_EINVAL at the front-end or for NULL. */
int          tbon_be_membership_events(tbon_net_t *net, int on);

#ifdef __cplusplus
}
#endif

#endif
