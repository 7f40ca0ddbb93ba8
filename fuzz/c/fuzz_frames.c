/* libFuzzer target for the TFRecord frame scanner (frames.c) and CRC-32C (crc32c.c).
 *
 * The input is either scanned as it is (first byte odd), or read as a list of frames to write
 * and damage (first byte even), so that the fuzzer reaches frames whose checksums hold:
 *
 *     byte 0        mode (bit 0) and max_records (byte 0 >> 1; 127 means "no limit")
 *     then per frame: op, len, len bytes of data (len and data cut by the end of the input)
 *         op & 3 == 1: the length's checksum is damaged
 *         op & 3 == 2: the data's checksum is damaged
 *         op & 3 == 3: the length lies (op >> 2 added to it, or 2^64 - 1 - (op >> 2) where
 *                      op >> 5 is set) with a checksum that matches the lie
 *     the last frame may be cut: the input's last byte, when the list is done, is how many
 *     bytes to drop from the end of the buffer.
 *
 * The buffer is copied into an allocation of exactly its size, so that AddressSanitizer sees
 * any read past it. The scan is compared with a reference that takes one frame at a time
 * (both checksums by the table implementation), and every CRC entry point with the table.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "endian.h"
#include "frames.h"

#define MAX_BUF (1u << 20)

static void
fail(const char *what)
{
    fprintf(stderr, "fuzz_frames: %s\n", what);
    abort();
}

/* The frames of buf[0:len] one at a time, as the scan must find them. */
static qp_frames_status
reference_scan(const uint8_t *buf, size_t len, size_t max_records, size_t *starts,
               size_t *lengths, size_t *n_records, size_t *stop)
{
    size_t pos = 0, n = 0;
    qp_frames_status status = QP_FRAMES_OK;
    while (n < max_records && pos < len) {
        size_t left = len - pos;
        if (left < QP_FRAME_HEADER_BYTES) {
            status = QP_FRAMES_SHORT_HEADER;
            break;
        }
        if (qp_crc32c_mask(qp_crc32c_by_table(0, buf + pos, 8)) != qp_load_le32(buf + pos + 8)) {
            status = QP_FRAMES_LENGTH_CRC;
            break;
        }
        uint64_t length = qp_load_le64(buf + pos);
        if (left < QP_FRAME_BYTES || length > left - QP_FRAME_BYTES) {
            status = QP_FRAMES_SHORT_RECORD;
            break;
        }
        const uint8_t *data = buf + pos + QP_FRAME_HEADER_BYTES;
        if (qp_crc32c_mask(qp_crc32c_by_table(0, data, (size_t)length))
            != qp_load_le32(data + length)) {
            status = QP_FRAMES_DATA_CRC;
            break;
        }
        starts[n] = pos;
        lengths[n] = (size_t)length;
        n++;
        pos += (size_t)length + QP_FRAME_BYTES;
    }
    *n_records = n;
    *stop = pos;
    return status;
}

/* Every CRC entry point against the table, over the buffer and three pieces of it. */
static void
check_crcs(const uint8_t *buf, size_t len)
{
    uint32_t want = qp_crc32c_by_table(0, buf, len);
    if (qp_crc32c(0, buf, len) != want)
        fail("qp_crc32c differs from the table");
    size_t cut = len / 3;
    if (qp_crc32c(qp_crc32c(0, buf, cut), buf + cut, len - cut) != want)
        fail("qp_crc32c does not continue");
    if (len >= 3) {
        size_t third = len / 3;
        const uint8_t *const parts[3] = {buf, buf + third, buf + 2 * third};
        uint32_t crcs[3] = {1, 2, 3};
        qp_crc32c_3(crcs, parts, third);
        for (int k = 0; k < 3; k++) {
            if (crcs[k] != qp_crc32c_by_table((uint32_t)k + 1, parts[k], third))
                fail("qp_crc32c_3 differs from the table");
        }
    }
}

/* Builds the frames the input describes into out (at most MAX_BUF bytes); returns the size. */
static size_t
build_frames(const uint8_t *in, size_t in_len, uint8_t *out)
{
    size_t pos = 0, at = 0;
    while (at + 2 <= in_len) {
        uint8_t op = in[at], len = in[at + 1];
        at += 2;
        size_t data_len = len <= in_len - at ? len : in_len - at;
        if (pos + data_len + QP_FRAME_BYTES > MAX_BUF)
            break;
        qp_frame_write(in + at, data_len, out + pos);
        at += data_len;
        switch (op & 3) {
        case 1:
            out[pos + 8] ^= 1;
            break;
        case 2:
            out[pos + QP_FRAME_HEADER_BYTES + data_len] ^= 0x80;
            break;
        case 3: {
            uint64_t lie = (op & 0x80) ? UINT64_MAX - ((op >> 2) & 7) : data_len + (op >> 2);
            qp_store_le(out + pos, lie, 8);
            qp_store_le(out + pos + 8, qp_masked_crc32c(out + pos, 8), 4);
            break;
        }
        default:
            break;
        }
        pos += data_len + QP_FRAME_BYTES;
    }
    if (at < in_len) {
        size_t drop = in[in_len - 1];
        pos = drop < pos ? pos - drop : 0;
    }
    return pos;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t *frames;
    static int ready;
    if (!ready) {
        qp_crc32c_init();
        frames = malloc(MAX_BUF);
        if (frames == NULL)
            return 0;
        ready = 1;
    }
    if (size == 0)
        return 0;
    size_t max_records = data[0] >> 1 == 127 ? SIZE_MAX : (size_t)(data[0] >> 1);
    size_t len;
    const uint8_t *source;
    if (data[0] & 1) {
        source = data + 1;
        len = size - 1;
    }
    else {
        len = build_frames(data + 1, size - 1, frames);
        source = frames;
    }
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, source, len);
    check_crcs(buf, len);

    /* The arrays sized as the module sizes them: by the buffer, never by a length in it. */
    size_t cap = len / QP_FRAME_BYTES + 1;
    if (max_records < cap)
        cap = max_records;
    size_t *starts = malloc((cap ? cap : 1) * sizeof(size_t));
    size_t *lengths = malloc((cap ? cap : 1) * sizeof(size_t));
    size_t *want_starts = malloc((cap ? cap : 1) * sizeof(size_t));
    size_t *want_lengths = malloc((cap ? cap : 1) * sizeof(size_t));
    if (starts && lengths && want_starts && want_lengths) {
        size_t n = 0, stop = 0, want_n = 0, want_stop = 0;
        qp_frames_status got = qp_frames_scan(buf, len, cap, starts, lengths, &n, &stop);
        qp_frames_status want = reference_scan(buf, len, cap, want_starts, want_lengths,
                                               &want_n, &want_stop);
        if (got != want || n != want_n || stop != want_stop)
            fail("the scan and the reference disagree on status, count or stop");
        for (size_t i = 0; i < n; i++) {
            if (starts[i] != want_starts[i] || lengths[i] != want_lengths[i])
                fail("the scan and the reference disagree on a frame");
        }
        if (got == QP_FRAMES_OK && n < cap && stop != len)
            fail("the scan stopped early with QP_FRAMES_OK");
    }
    free(starts);
    free(lengths);
    free(want_starts);
    free(want_lengths);
    free(buf);
    return 0;
}
