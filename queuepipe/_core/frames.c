/* TFRecord framing, checked. See frames.h. */
#include "frames.h"

#include <string.h>

#include "crc32c.h"
#include "endian.h"

/* Checks the header of the frame at buf[0:left] (its length's checksum too where
 * check_crc): on QP_FRAMES_OK stores its data length, which then fits in left with the
 * footer, in *data_len. */
static qp_frames_status
check_header(const uint8_t *buf, size_t left, int check_crc, size_t *data_len)
{
    if (left < QP_FRAME_HEADER_BYTES) {
        return QP_FRAMES_SHORT_HEADER;
    }
    if (check_crc && qp_masked_crc32c(buf, 8) != qp_load_le32(buf + 8)) {
        return QP_FRAMES_LENGTH_CRC;
    }
    uint64_t length = qp_load_le64(buf);
    /* Compared as unsigned 64-bit against the bytes left, before any pointer moves. */
    if (left < QP_FRAME_BYTES || length > (uint64_t)(left - QP_FRAME_BYTES)) {
        return QP_FRAMES_SHORT_RECORD;
    }
    *data_len = (size_t)length;
    return QP_FRAMES_OK;
}

/* Whether the data of frame i (its header checked) stores its own checksum. */
static int
data_intact(const uint8_t *buf, const size_t *starts, const size_t *lengths, size_t i)
{
    const uint8_t *data = buf + starts[i] + QP_FRAME_HEADER_BYTES;
    return qp_masked_crc32c(data, lengths[i]) == qp_load_le32(data + lengths[i]);
}

/* The index of the first of frames[0:n] (their headers checked) whose data checksum fails,
 * or n. Frames are checked three at a time, over the bytes they all have, so that the CRC
 * instruction works on three streams at once; each one's rest alone. */
static size_t
first_damaged_data(const uint8_t *buf, const size_t *starts, const size_t *lengths, size_t n)
{
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        size_t common = lengths[i];
        for (size_t k = 1; k < 3; k++) {
            common = lengths[i + k] < common ? lengths[i + k] : common;
        }
        const uint8_t *const data[3] = {buf + starts[i] + QP_FRAME_HEADER_BYTES,
                                        buf + starts[i + 1] + QP_FRAME_HEADER_BYTES,
                                        buf + starts[i + 2] + QP_FRAME_HEADER_BYTES};
        uint32_t crcs[3] = {0, 0, 0};
        qp_crc32c_3(crcs, data, common);
        for (size_t k = 0; k < 3; k++) {
            size_t length = lengths[i + k];
            uint32_t crc = qp_crc32c(crcs[k], data[k] + common, length - common);
            if (qp_crc32c_mask(crc) != qp_load_le32(data[k] + length)) {
                return i + k;
            }
        }
    }
    for (; i < n; i++) {
        if (!data_intact(buf, starts, lengths, i)) {
            return i;
        }
    }
    return n;
}

/* The frames' headers up to the first that fails (see qp_frames_scan and qp_frames_walk). */
static qp_frames_status
walk_headers(const uint8_t *buf, size_t len, size_t max_records, int check_crc,
             size_t *frame_starts, size_t *data_lengths, size_t *n_records, size_t *stop)
{
    size_t pos = 0, taken = 0;
    qp_frames_status status = QP_FRAMES_OK;
    while (taken < max_records && pos < len) {
        size_t data_len = 0;
        status = check_header(buf + pos, len - pos, check_crc, &data_len);
        if (status != QP_FRAMES_OK) {
            break;
        }
        frame_starts[taken] = pos;
        data_lengths[taken] = data_len;
        taken++;
        pos += data_len + QP_FRAME_BYTES;
    }
    *n_records = taken;
    *stop = pos;
    return status;
}

qp_frames_status
qp_frames_walk(const uint8_t *buf, size_t len, size_t max_records, size_t *frame_starts,
               size_t *data_lengths, size_t *n_records, size_t *stop)
{
    return walk_headers(buf, len, max_records, 0, frame_starts, data_lengths, n_records, stop);
}

qp_frames_status
qp_frames_scan(const uint8_t *buf, size_t len, size_t max_records, size_t *frame_starts,
               size_t *data_lengths, size_t *n_records, size_t *stop)
{
    /* First every header up to the first that fails, then the data of those frames: the
     * scan stops at whichever damage comes first. */
    size_t taken, pos;
    qp_frames_status status = walk_headers(buf, len, max_records, 1, frame_starts,
                                           data_lengths, &taken, &pos);
    size_t intact = first_damaged_data(buf, frame_starts, data_lengths, taken);
    if (intact < taken) {
        taken = intact;
        pos = frame_starts[intact];
        status = QP_FRAMES_DATA_CRC;
    }
    *n_records = taken;
    *stop = pos;
    return status;
}

void
qp_frame_write(const uint8_t *data, size_t len, uint8_t *out)
{
    qp_store_le(out, (uint64_t)len, 8);
    qp_store_le(out + 8, qp_masked_crc32c(out, 8), 4);
    memcpy(out + QP_FRAME_HEADER_BYTES, data, len);
    qp_store_le(out + QP_FRAME_HEADER_BYTES + len, qp_masked_crc32c(data, len), 4);
}
