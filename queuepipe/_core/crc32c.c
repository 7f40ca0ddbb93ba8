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
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7) /* Linux's arch/arm64/include/uapi/asm/hwcap.h */
#endif
/* The compilers' builtins, not arm_acle.h's __crc32cd: older headers declare those only when
 * the whole file is compiled for the CRC extension, not one function. */
#ifdef __clang__
#define QP_TARGET_CRC __attribute__((target("crc")))
#define QP_CRC32CD(crc, word) __builtin_arm_crc32cd((crc), (word))
#define QP_CRC32CB(crc, byte) __builtin_arm_crc32cb((crc), (byte))
#else
#define QP_TARGET_CRC __attribute__((target("+crc")))
#define QP_CRC32CD(crc, word) __builtin_aarch64_crc32cx((crc), (word))
#define QP_CRC32CB(crc, byte) __builtin_aarch64_crc32cb((crc), (byte))
#endif
#endif

#define QP_CRC_POLY 0x82f63b78u

/* The CRC register ("state", the CRC before its final inversion) after p[0:len]. */
typedef uint32_t (*qp_crc_update)(uint32_t state, const uint8_t *p, size_t len);
/* The same for three buffers of one length at once. */
typedef void (*qp_crc_update3)(uint32_t states[3], const uint8_t *const p[3], size_t len);

/* A long buffer is checksummed as three streams of QP_CRC_BLOCK bytes at a time, joined by
 * shifting a stream's state over the bytes of the streams after it (the register after a
 * block is linear in the register before: shift(s) ^ the block's register from 0). */
#define QP_CRC_BLOCK 4096
static uint32_t shift_block[4][256]; /* shift over QP_CRC_BLOCK zero bytes, a byte at a time */

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

/* Three streams at once: the instruction's latency (3 cycles) is hidden, not waited on. */
__attribute__((target("sse4.2"))) static void
update3_sse42(uint32_t states[3], const uint8_t *const p[3], size_t len)
{
    uint64_t a = states[0], b = states[1], c = states[2];
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, p[0] + i, 8);
        memcpy(&wb, p[1] + i, 8);
        memcpy(&wc, p[2] + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
    }
    states[0] = update_sse42((uint32_t)a, p[0] + i, len - i);
    states[1] = update_sse42((uint32_t)b, p[1] + i, len - i);
    states[2] = update_sse42((uint32_t)c, p[2] + i, len - i);
}
#endif

#ifdef QP_HAVE_ARMV8
QP_TARGET_CRC static uint32_t
update_armv8(uint32_t state, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        state = QP_CRC32CD(state, qp_load_le64(p));
        p += 8;
        len -= 8;
    }
    while (len--) {
        state = QP_CRC32CB(state, *p++);
    }
    return state;
}

QP_TARGET_CRC static void
update3_armv8(uint32_t states[3], const uint8_t *const p[3], size_t len)
{
    uint32_t a = states[0], b = states[1], c = states[2];
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        a = QP_CRC32CD(a, qp_load_le64(p[0] + i));
        b = QP_CRC32CD(b, qp_load_le64(p[1] + i));
        c = QP_CRC32CD(c, qp_load_le64(p[2] + i));
    }
    states[0] = update_armv8(a, p[0] + i, len - i);
    states[1] = update_armv8(b, p[1] + i, len - i);
    states[2] = update_armv8(c, p[2] + i, len - i);
}
#endif

static void
update3_table(uint32_t states[3], const uint8_t *const p[3], size_t len)
{
    for (int k = 0; k < 3; k++) {
        states[k] = update_table(states[k], p[k], len);
    }
}

static qp_crc_update update = update_table;
static qp_crc_update3 update3 = update3_table;
static const char *instruction = "table";

static uint32_t
shift(uint32_t state)
{
    return shift_block[0][state & 0xff] ^ shift_block[1][(state >> 8) & 0xff]
           ^ shift_block[2][(state >> 16) & 0xff] ^ shift_block[3][state >> 24];
}

static void
init_shift_block(void)
{
    static const uint8_t zeros[QP_CRC_BLOCK];
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) {
        basis[bit] = update_table(1u << bit, zeros, QP_CRC_BLOCK);
    }
    for (int k = 0; k < 4; k++) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t s = 0;
            for (int bit = 0; bit < 8; bit++) {
                if (b & (1u << bit)) {
                    s ^= basis[8 * k + bit];
                }
            }
            shift_block[k][b] = s;
        }
    }
}

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
    init_shift_block();
#ifdef QP_HAVE_SSE42
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        update = update_sse42;
        update3 = update3_sse42;
        instruction = "sse4.2";
    }
#endif
#ifdef QP_HAVE_ARMV8
    if (getauxval(AT_HWCAP) & HWCAP_CRC32) {
        update = update_armv8;
        update3 = update3_armv8;
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
    uint32_t state = ~crc;
    if (update3 != update3_table) {
        for (; len >= 3 * QP_CRC_BLOCK; data += 3 * QP_CRC_BLOCK, len -= 3 * QP_CRC_BLOCK) {
            uint32_t states[3] = {state, 0, 0};
            const uint8_t *const blocks[3] = {data, data + QP_CRC_BLOCK,
                                              data + 2 * QP_CRC_BLOCK};
            update3(states, blocks, QP_CRC_BLOCK);
            state = shift(shift(states[0]) ^ states[1]) ^ states[2];
        }
    }
    return ~update(state, data, len);
}

void
qp_crc32c_3(uint32_t crcs[3], const uint8_t *const data[3], size_t len)
{
    uint32_t states[3] = {~crcs[0], ~crcs[1], ~crcs[2]};
    update3(states, data, len);
    for (int k = 0; k < 3; k++) {
        crcs[k] = ~states[k];
    }
}

uint32_t
qp_crc32c_by_table(uint32_t crc, const uint8_t *data, size_t len)
{
    return ~update_table(~crc, data, len);
}

uint32_t
qp_masked_crc32c(const uint8_t *data, size_t len)
{
    return qp_crc32c_mask(qp_crc32c(0, data, len));
}
