/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78): the CPU's instruction where it has
 * one, chosen at run time, and a slicing-by-8 table everywhere else. Our own code. */
#include "crc32c.h"

#include <string.h>

#include "endian.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QP_HAVE_SSE42 1
#include <nmmintrin.h>
#endif

#if defined(__aarch64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define QP_HAVE_ARMV8 1
#include <arm_acle.h>
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7) /* Linux's arch/arm64/include/uapi/asm/hwcap.h */
#endif
#ifdef __clang__
#define QP_TARGET_CRC __attribute__((target("crc")))
#else
#define QP_TARGET_CRC __attribute__((target("+crc")))
#endif
#endif

#define QP_CRC_POLY 0x82f63b78u

typedef uint32_t (*qp_crc_update)(uint32_t state, const uint8_t *p, size_t len);

static uint32_t table[8][256]; /* table[k][b]: byte b followed by k zero bytes */

/* Slicing-by-8: eight bytes per step through eight tables. */
static uint32_t
update_table(uint32_t state, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint64_t word = qp_load_le64(p);
        uint32_t lo = (uint32_t)word ^ state;
        uint32_t hi = (uint32_t)(word >> 32);
        state = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff]
                ^ table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24]
                ^ table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff]
                ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) {
        state = table[0][(state ^ *p++) & 0xff] ^ (state >> 8);
    }
    return state;
}

#ifdef QP_HAVE_SSE42
__attribute__((target("sse4.2"))) static uint32_t
update_sse42(uint32_t state, const uint8_t *p, size_t len)
{
    uint64_t s = state;
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, p, 8); /* x86 is little-endian */
        s = _mm_crc32_u64(s, word);
        p += 8;
        len -= 8;
    }
    state = (uint32_t)s;
    while (len--) {
        state = _mm_crc32_u8(state, *p++);
    }
    return state;
}
#endif

#ifdef QP_HAVE_ARMV8
QP_TARGET_CRC static uint32_t
update_armv8(uint32_t state, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        state = __crc32cd(state, qp_load_le64(p));
        p += 8;
        len -= 8;
    }
    while (len--) {
        state = __crc32cb(state, *p++);
    }
    return state;
}
#endif

static qp_crc_update update = update_table;
static const char *instruction = "table";

void
qp_crc32c_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ QP_CRC_POLY : c >> 1;
        }
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++) {
        for (int k = 1; k < 8; k++) {
            table[k][b] = table[0][table[k - 1][b] & 0xff] ^ (table[k - 1][b] >> 8);
        }
    }
#ifdef QP_HAVE_SSE42
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        update = update_sse42;
        instruction = "sse4.2";
    }
#endif
#ifdef QP_HAVE_ARMV8
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) {
        update = update_armv8;
        instruction = "armv8";
    }
#endif
}

const char *
qp_crc32c_instruction(void)
{
    return instruction;
}

uint32_t
qp_crc32c(uint32_t crc, const uint8_t *data, size_t len)
{
    return ~update(~crc, data, len);
}

uint32_t
qp_crc32c_by_table(uint32_t crc, const uint8_t *data, size_t len)
{
    return ~update_table(~crc, data, len);
}

uint32_t
qp_masked_crc32c(const uint8_t *data, size_t len)
{
    uint32_t crc = qp_crc32c(0, data, len);
    return ((crc >> 15) | (crc << 17)) + QP_CRC_MASK_DELTA;
}
