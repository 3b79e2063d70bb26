/* crc32c.h - CRC-32C (Castagnoli), hardware-accelerated where the CPU has it
 *
 * The checksum of every tbon frame (docs/protocol.md). Values follow the usual
 * convention (iSCSI, ext4, SCTP): reflected polynomial 0x82F63B78, initial
 * value and final xor 0xFFFFFFFF, so tb_crc32c(0, "123456789", 9) == 0xE3069283.
 * All functions are thread-safe; the tables are built once, on first use.
 */
#ifndef TB_CRC32C_H
#define TB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of buf[0..len), continuing from crc (0 to start). Chainable like
 * zlib's crc32(): tb_crc32c(tb_crc32c(0, a, na), b, nb) is the CRC of a||b.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, else tables. */
uint32_t tb_crc32c(uint32_t crc, const void *buf, size_t len);

/* Copy len bytes from src to dst (which must not overlap) and return the
 * CRC-32C of those bytes continuing from crc, in one pass over the data: the
 * checksum rides along with a copy that has to happen anyway (seed 004, 5.1). */
uint32_t tb_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* The CRC of a||b given crc_a = CRC of a, crc_b = CRC of b and len_b = |b|,
 * without the data (e.g. a fresh frame header in front of a payload whose
 * CRC is cached). Costs O(log len_b). */
uint32_t tb_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* The portable table (slicing-by-8) implementation, whatever the CPU. */
uint32_t tb_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* The hardware implementation; only valid when tb_crc32c_hw_available().
 * Exposed so tests and benchmarks can compare both paths. */
uint32_t tb_crc32c_hw(uint32_t crc, const void *buf, size_t len);

/* 1 if this build and CPU have the SSE4.2 crc32 instruction (and the
 * environment does not force the tables with TBON_CRC32C=sw), else 0. */
int tb_crc32c_hw_available(void);

#endif
