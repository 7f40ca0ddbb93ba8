/* TFRecord framing, checked. See frames.h. */
#include "frames.h"

#include <string.h>

#include "crc32c.h"
#include "endian.h"

/* Checks the frame at buf[0:left]: on QP_FRAMES_OK stores its data length in *data_len. */
static qp_frames_status
check_frame(const uint8_t *buf, size_t left, size_t *data_len)
{
    if (left < QP_FRAME_HEADER_BYTES) {
        return QP_FRAMES_SHORT_HEADER;
    }
    if (qp_masked_crc32c(buf, 8) != qp_load_le32(buf + 8)) {
        return QP_FRAMES_LENGTH_CRC;
    }
    uint64_t length = qp_load_le64(buf);
    /* Compared as unsigned 64-bit against the bytes left, before any pointer moves. */
    if (left < QP_FRAME_BYTES || length > (uint64_t)(left - QP_FRAME_BYTES)) {
        return QP_FRAMES_SHORT_RECORD;
    }
    const uint8_t *data = buf + QP_FRAME_HEADER_BYTES;
    if (qp_masked_crc32c(data, (size_t)length) != qp_load_le32(data + length)) {
        return QP_FRAMES_DATA_CRC;
    }
    *data_len = (size_t)length;
    return QP_FRAMES_OK;
}

qp_frames_status
qp_frames_scan(const uint8_t *buf, size_t len, size_t max_records, size_t *frame_starts,
               size_t *data_lengths, size_t *n_records, size_t *stop)
{
    size_t pos = 0, taken = 0;
    qp_frames_status status = QP_FRAMES_OK;
    while (taken < max_records && pos < len) {
        size_t data_len = 0;
        status = check_frame(buf + pos, len - pos, &data_len);
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

void
qp_frame_write(const uint8_t *data, size_t len, uint8_t *out)
{
    qp_store_le(out, (uint64_t)len, 8);
    qp_store_le(out + 8, qp_masked_crc32c(out, 8), 4);
    memcpy(out + QP_FRAME_HEADER_BYTES, data, len);
    qp_store_le(out + QP_FRAME_HEADER_BYTES + len, qp_masked_crc32c(data, len), 4);
}
