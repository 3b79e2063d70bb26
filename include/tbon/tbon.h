/* tbon.h - the tbon public API: includes every public header */
#ifndef TBON_TBON_H
#define TBON_TBON_H

#include <tbon/common.h>
#include <tbon/packet.h>
#include <tbon/filter.h>
#include <tbon/net.h>
#include <tbon/frontend.h>
#include <tbon/backend.h>

#endif
