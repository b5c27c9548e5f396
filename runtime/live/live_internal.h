/* Between the files of runtime/live/: the control thread (control.c) and the segment it
 * publishes (publish.c). */
#ifndef PS_LIVE_INTERNAL_H
#define PS_LIVE_INTERNAL_H
#include <stdint.h>
#include "pathscope.h"

enum { PS_LIVE_RUNNING = 0, PS_LIVE_FINALIZING = 1, PS_LIVE_ENDED = 2 };

/* publish.c.  Create: the segment NAME.live in dirfd, mapped (0 or an errno).  Publish: one
 * seqlock write of the header and the data (control thread only); returns the interval to
 * use next (doubled after a publish over 1 ms of CPU).  Unmap: [signal-safe]. */
int ps_live_segment_create(int dirfd, const char *name, const char *socket_name,
                           uint64_t start_time, unsigned interval_ms);
unsigned ps_live_publish(int state);
void ps_live_segment_unmap(void);

/* frames.c */
void ps_live_modules_refresh(void);
void ps_live_modules_write(ps_fmt_t *f);
#endif
