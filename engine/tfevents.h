/* TensorBoard event files: TFRecord framing around tensorflow.Event
 * messages (engine/tfevent.proto, encoded by libprotobuf-c).  A record is
 *   uint64 length (little endian), uint32 masked CRC-32C of those 8 bytes,
 *   the message, uint32 masked CRC-32C of the message,
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.  Each record is one
 * write(2), so a killed run leaves at most a torn last record, which
 * TensorBoard skips. */
#ifndef DLJOB_ENGINE_TFEVENTS_H
#define DLJOB_ENGINE_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

struct dl_events {
	int fd; /* -1: closed */
	char path[4096];
};

struct dl_event_scalar {
	const char *tag;  /* e.g. "train/loss" */
	double value;     /* stored as float, as TensorBoard's simple_value */
};

/* Create DIR/events.out.tfevents.<unix seconds>.<host>.<pid> (never an
 * existing file) and write its first record (file_version "brain.Event:2").
 * A run resumed after step resumed_at (>= 0; -1 for a fresh run) adds a
 * SessionLog START at step resumed_at + 1, so TensorBoard drops what an
 * earlier file logged for the steps this run repeats.  Returns 0, or -1
 * with the reason in err. */
int dl_events_open(struct dl_events *e, const char *dir, long resumed_at, char *err, size_t errlen);

/* One Event at `step` with a Summary of the n scalars; wall_time is now. */
int dl_events_scalars(struct dl_events *e, long step, const struct dl_event_scalar *v, size_t n, char *err,
                      size_t errlen);

void dl_events_close(struct dl_events *e);

/* CRC-32C (Castagnoli) of buf, continuing from crc (0 to start). */
uint32_t dl_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
