/* fe_values.h - a packet's values as tbon_frontend prints them (fe_values.c),
 * whatever the packet's format. */
#ifndef TBON_FE_VALUES_H
#define TBON_FE_VALUES_H

#include <tbon/tbon.h>

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* s[0..n) as a JSON string. jansson takes UTF-8 only and a packet string
 * is bytes: a byte outside a valid UTF-8 sequence becomes U+FFFD, so that
 * every line stays valid JSON. NULL when out of memory. */
json_t *fe_json_bytes(const uint8_t *s, size_t n);

/* Every field of p, comma-separated ("(no values)" for none): numbers,
 * strings in quotes escaped as in JSON, [elements] of an array (at most 64
 * shown). */
void fe_print_values(FILE *f, const tbon_packet_t *p);

/* Every field of p as a JSON array (arrays whole, null for a field that
 * cannot be read); NULL when out of memory. */
json_t *fe_json_values(const tbon_packet_t *p);

/* o on one line of stdout, compact, and released; what (a result, an
 * event) names it on stderr if it cannot be made (o NULL) or written. */
void fe_print_json_line(json_t *o, const char *what);

#endif
