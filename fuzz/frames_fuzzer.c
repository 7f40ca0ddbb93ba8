/* libFuzzer target on the pure-C TFRecord frame scanner (queuepipe/_core/frames.c): no Python.
 *
 *   make fuzz-frames                     # builds it with clang, runs it for 60 s
 *
 * The first input byte, when below 16, is max_records; the rest is the buffer scanned. Beyond
 * what AddressSanitizer and UBSan check (no read outside the input, no undefined behaviour),
 * every result is checked against the format, with the table CRC: the frames taken lie back
 * to back from the start, each with both checksums right; stop ends the last one; and the
 * status says what lies at stop. A violation traps, and libFuzzer saves the input.
 */
#include <stdint.h>
#include <stdlib.h>

#include "crc32c.h"
#include "endian.h"
#include "frames.h"

#define CHECK(condition) \
    do {                 \
        if (!(condition)) { \
            __builtin_trap(); \
        }                \
    } while (0)

static int
checks_out(const uint8_t *p, size_t len, const uint8_t *stored)
{
    return qp_crc32c_mask(qp_crc32c_by_table(0, p, len)) == qp_load_le32(stored);
}

/* Checks what the scanner says of the frame at buf[0:left] where it stopped. */
static void
check_stop(qp_frames_status status, const uint8_t *buf, size_t left)
{
    uint64_t length = left >= 8 ? qp_load_le64(buf) : 0;
    switch (status) {
    case QP_FRAMES_OK:
        break;
    case QP_FRAMES_SHORT_HEADER:
        CHECK(left > 0 && left < QP_FRAME_HEADER_BYTES);
        break;
    case QP_FRAMES_LENGTH_CRC:
        CHECK(left >= QP_FRAME_HEADER_BYTES && !checks_out(buf, 8, buf + 8));
        break;
    case QP_FRAMES_SHORT_RECORD:
        CHECK(left >= QP_FRAME_HEADER_BYTES && checks_out(buf, 8, buf + 8));
        CHECK(left < QP_FRAME_BYTES || length > left - QP_FRAME_BYTES);
        break;
    case QP_FRAMES_DATA_CRC:
        CHECK(left >= QP_FRAME_BYTES && checks_out(buf, 8, buf + 8));
        CHECK(length <= left - QP_FRAME_BYTES);
        CHECK(!checks_out(buf + QP_FRAME_HEADER_BYTES, (size_t)length,
                          buf + QP_FRAME_HEADER_BYTES + length));
        break;
    default:
        CHECK(0);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        qp_crc32c_init();
        ready = 1;
    }
    size_t max_records = size / QP_FRAME_BYTES + 1;
    if (size > 0 && data[0] < 16) {
        max_records = data[0];
        data++;
        size--;
    }
    size_t *starts = malloc((max_records + 1) * sizeof(size_t));
    size_t *lengths = malloc((max_records + 1) * sizeof(size_t));
    CHECK(starts != NULL && lengths != NULL);
    size_t n = 0, stop = 0;
    qp_frames_status status = qp_frames_scan(data, size, max_records, starts, lengths, &n,
                                             &stop);
    CHECK(n <= max_records);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(starts[i] == pos && size - pos >= QP_FRAME_BYTES);
        CHECK(lengths[i] <= size - pos - QP_FRAME_BYTES);
        CHECK(qp_load_le64(data + pos) == lengths[i]);
        CHECK(checks_out(data + pos, 8, data + pos + 8));
        CHECK(checks_out(data + pos + QP_FRAME_HEADER_BYTES, lengths[i],
                         data + pos + QP_FRAME_HEADER_BYTES + lengths[i]));
        pos += lengths[i] + QP_FRAME_BYTES;
    }
    CHECK(stop == pos);
    if (status == QP_FRAMES_OK) {
        CHECK(n == max_records || stop == size);
    }
    else {
        check_stop(status, data + stop, size - stop);
    }
    free(starts);
    free(lengths);
    return 0;
}
