/* CRC-32C (Castagnoli), as TFRecord framing uses it: no Python, no allocation.
 *
 * qp_crc32c_init() picks the CPU's CRC instruction (SSE4.2 on x86-64, the ARMv8 CRC
 * extension on AArch64 Linux) when the CPU has one, and a slicing-by-8 table otherwise. It
 * must run once before the other functions (the extension module calls it at import).
 */
#ifndef QP_CRC32C_H
#define QP_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The delta TFRecord adds to a rotated CRC (TensorFlow's crc32c::Mask). */
#define QP_CRC_MASK_DELTA 0xa282ead8u

/* The masked form of a CRC that TFRecord frames store (TensorFlow's crc32c::Mask). */
static inline uint32_t
qp_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + QP_CRC_MASK_DELTA;
}

void qp_crc32c_init(void);

/* "sse4.2", "armv8" or "table": the implementation qp_crc32c_init() chose. */
const char *qp_crc32c_instruction(void);

/* The CRC-32C of data[0:len] continuing from crc, the CRC-32C of the bytes before
 * (0 for none): qp_crc32c(qp_crc32c(0, a), b) == qp_crc32c(0, a + b). */
uint32_t qp_crc32c(uint32_t crc, const uint8_t *data, size_t len);

/* qp_crc32c of three buffers of one length at once: crcs[k] = qp_crc32c(crcs[k], data[k],
 * len), faster than three calls where the CRC is an instruction (its latency overlapped). */
void qp_crc32c_3(uint32_t crcs[3], const uint8_t *const data[3], size_t len);

/* qp_crc32c by the table, whatever the CPU has: lets tests check both implementations. */
uint32_t qp_crc32c_by_table(uint32_t crc, const uint8_t *data, size_t len);

/* The masked CRC-32C of data[0:len] that a TFRecord frame stores. */
uint32_t qp_masked_crc32c(const uint8_t *data, size_t len);

#endif
