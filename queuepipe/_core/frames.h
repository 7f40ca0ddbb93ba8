/* TFRecord framing, checked: no Python, no allocation.
 *
 * A frame is  uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data),
 * little-endian (TensorFlow's core/lib/io/record_writer.cc).
 */
#ifndef QP_FRAMES_H
#define QP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#define QP_FRAME_HEADER_BYTES 12 /* length and its checksum */
#define QP_FRAME_FOOTER_BYTES 4  /* the data's checksum */
#define QP_FRAME_BYTES (QP_FRAME_HEADER_BYTES + QP_FRAME_FOOTER_BYTES)

/* Why a scan stopped. Every status but QP_FRAMES_OK stops at a frame that is not taken, at
 * *stop: the caller decides whether that is damage or a frame to complete from the file. */
typedef enum {
    QP_FRAMES_OK = 0,           /* max_records taken, or the buffer ends after a whole frame */
    QP_FRAMES_SHORT_HEADER = 1, /* fewer than 12 bytes left, but some */
    QP_FRAMES_LENGTH_CRC = 2,   /* the length's checksum does not match */
    QP_FRAMES_SHORT_RECORD = 3, /* the length (checked) runs past the end of the buffer */
    QP_FRAMES_DATA_CRC = 4      /* the data's checksum does not match */
} qp_frames_status;

/* Scans the frames lying back to back in buf[0:len], taking at most max_records of them.
 * Frame i taken starts at frame_starts[i] (the offset of its header in buf) and holds
 * data_lengths[i] data bytes from frame_starts[i] + 12; both arrays hold max_records entries.
 * Stores the number taken in *n_records and the offset just past the last frame taken in
 * *stop. A length is used only after its checksum matched and it was compared with the bytes
 * left, so no length, however large, moves a pointer past buf + len. */
qp_frames_status qp_frames_scan(const uint8_t *buf, size_t len, size_t max_records,
                                size_t *frame_starts, size_t *data_lengths,
                                size_t *n_records, size_t *stop);

/* Walks the frames lying back to back in buf[0:len] by their lengths alone, as
 * qp_frames_scan does but checking no checksum (frames a scan checked already, copied since),
 * and stores the same. Stops at QP_FRAMES_SHORT_HEADER or QP_FRAMES_SHORT_RECORD where what is
 * left holds no whole frame. */
qp_frames_status qp_frames_walk(const uint8_t *buf, size_t len, size_t max_records,
                                size_t *frame_starts, size_t *data_lengths,
                                size_t *n_records, size_t *stop);

/* Writes the frame of data[0:len] to out[0:len + 16]. */
void qp_frame_write(const uint8_t *data, size_t len, uint8_t *out);

#endif
