/* The burst guard's entry points for shim.c's rx/tx bursts (burst_guard.c says why it
 * exists). Without the `burst-guard` feature they compile to nothing. */
#ifndef RACEWAY_BURST_GUARD_H
#define RACEWAY_BURST_GUARD_H

#include <stdint.h>

struct burst_guard_slot;

#ifdef RACEWAY_BURST_GUARD
/* Marks the calling thread inside a burst on `port`; NULL when the port is not guarded. */
struct burst_guard_slot *burst_guard_enter(uint16_t port);
/* Ends the burst `burst_guard_enter` began (nothing for NULL). */
void burst_guard_leave(struct burst_guard_slot *slot);
#else
static inline struct burst_guard_slot *burst_guard_enter(uint16_t port)
{
	(void)port;
	return NULL;
}
static inline void burst_guard_leave(struct burst_guard_slot *slot) { (void)slot; }
#endif

#endif
