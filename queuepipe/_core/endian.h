/* Little-endian loads and stores, whatever the host's byte order (compilers turn them into
 * one move on little-endian hosts). */
#ifndef QP_ENDIAN_H
#define QP_ENDIAN_H

#include <stdint.h>

static inline uint64_t
qp_load_le64(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16
           | (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40
           | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint32_t
qp_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void
qp_store_le(uint8_t *p, uint64_t v, int n_bytes)
{
    for (int k = 0; k < n_bytes; k++) {
        p[k] = (uint8_t)(v >> (8 * k));
    }
}

#endif
