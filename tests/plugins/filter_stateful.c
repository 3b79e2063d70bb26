/* filter_stateful.c - a test plug-in with state, get_FilterState and
 * free_state: count_waves outputs "%uld" the number of waves it has run on
 * this state; count_waves_freed counts calls of count_waves_free_state (the
 * test reads it through dlsym to see that tbon called it). */
#include <tbon/tbon.h>

#include <stdlib.h>

tbon_filter_fn       count_waves;
tbon_filter_state_fn count_waves_get_FilterState;
tbon_filter_free_fn  count_waves_free_state;

const char count_waves_format_string[] = "";
int count_waves_freed;

int count_waves(tbon_packet_t *const in[], size_t n_in, tbon_packet_list_t *out,
                void **state, const tbon_filter_ctx_t *ctx)
{
    uint64_t *waves = *state;

    (void)in;
    (void)n_in;
    (void)ctx;
    if (!waves) {
        if (!(waves = calloc(1, sizeof *waves)))
            return TBON_ENOMEM;
        *state = waves;
    }
    ++*waves;
    return tbon_packet_list_push(out, tbon_packet_new(TBON_FIRST_APP_TAG, "%uld", *waves));
}

tbon_packet_t *count_waves_get_FilterState(void **state, uint32_t stream)
{
    uint64_t *waves = *state;
    return tbon_packet_new(TBON_FIRST_APP_TAG + 1, "%uld %ud", waves ? *waves : 0,
                           stream);
}

void count_waves_free_state(void *state)
{
    count_waves_freed++;
    free(state);
}
