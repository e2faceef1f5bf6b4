/* The burst guard: a grace period between a driver unmapping a port's memory and the bursts
 * still inside that port. In a file of its own, behind a feature, because of what it does to
 * the whole process: it defines `munmap`. Without the feature (`--no-default-features` on
 * dpdk-sys) shim.c's bursts call the driver directly and `shim_guard_bursts` says it guards
 * nothing; raceway then warns at start for each port whose driver needs the guard.
 *
 * Why a process-wide munmap is the least bad place for it: the unmap happens inside the
 * driver, on the EAL's interrupt thread, with no hook of DPDK's before it; the only
 * function every path to it calls is munmap. Interposing it costs the other threads one
 * thread-local check (`rte_thread_is_intr`) per call and nothing else. */
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <rte_interrupts.h>
#include "shim.h"
#include "burst_guard.h"

/* Bursts against a driver's teardown (the cargo feature `burst-guard`, on by default).
 *
 * net_memif unmaps a connection's shared memory on the EAL interrupt thread when the peer goes
 * away (it exits, or stops the port), without waiting for the lcores polling the port: a
 * worker inside rte_eth_rx_burst or rte_eth_tx_burst at that moment reads or writes unmapped
 * memory and the process dies of SIGSEGV (a spine of the live memif fabric test, when a leaf
 * exited: once in CI, twice in about thirty runs here; the core showed the worker reading its
 * ring in eth_memif_rx just after the flag check). The driver clears its "connected" flag
 * before it unmaps, and each burst checks that flag first; what is missing is a grace period
 * between the two. This supplies it:
 *
 * - each thread that bursts on a guarded port owns a slot whose sequence number is odd while
 *   it is inside a burst (entering is a full barrier, so the burst's read of the driver's flag
 *   cannot move before it);
 * - munmap, interposed for the whole process, waits on the interrupt thread only until every
 *   burst that was inside a guarded port when it was called has returned. A burst that starts
 *   later reads the cleared flag and returns without touching the memory. The definition below
 *   is in the executable, whose dynamic symbols come first when the EAL loads a PMD, and ld
 *   exports it because librte_eal, linked in, references munmap too (`nm -D raceway`).
 *
 * Invariant: on the interrupt thread, no munmap returns while a burst that began before the
 * call is still running on a guarded port. Other threads' munmap calls go straight to the
 * kernel. Guarding a port costs one locked add per burst call on it; unguarded ports pay one
 * byte load. */
#define BURST_GUARD_SLOTS (2 * RTE_MAX_LCORE)

struct burst_guard_slot {
	alignas(RTE_CACHE_LINE_SIZE) atomic_uint_fast64_t seq;
};

static struct burst_guard_slot burst_guard_slots[BURST_GUARD_SLOTS];
static atomic_uint burst_guard_claimed;
static uint8_t burst_guarded_port[RTE_MAX_ETHPORTS];
/* The calling thread's slot; burst_guard_none once slots ran out (the thread's bursts then go
 * unguarded: more bursting threads than twice the lcores, which raceway never starts). */
static struct burst_guard_slot burst_guard_none;
static _Thread_local struct burst_guard_slot *burst_guard_mine;

int shim_guard_bursts(uint16_t port)
{
	if (port < RTE_MAX_ETHPORTS)
		burst_guarded_port[port] = 1;
	return 1;
}

struct burst_guard_slot *burst_guard_enter(uint16_t port)
{
	if (port >= RTE_MAX_ETHPORTS || !burst_guarded_port[port])
		return NULL;
	struct burst_guard_slot *slot = burst_guard_mine;
	if (slot == NULL) {
		unsigned int index = atomic_fetch_add(&burst_guard_claimed, 1);
		slot = index < BURST_GUARD_SLOTS ? &burst_guard_slots[index] : &burst_guard_none;
		burst_guard_mine = slot;
	}
	if (slot == &burst_guard_none)
		return NULL;
	atomic_fetch_add_explicit(&slot->seq, 1, memory_order_seq_cst);
	return slot;
}

void burst_guard_leave(struct burst_guard_slot *slot)
{
	/* Only the owning thread writes its slot: a plain store ends the burst. */
	if (slot != NULL)
		atomic_store_explicit(&slot->seq, atomic_load_explicit(&slot->seq, memory_order_relaxed) + 1,
				      memory_order_release);
}

/* Waits until every burst inside a guarded port at the time of the call has returned. */
static void burst_guard_wait(void)
{
	atomic_thread_fence(memory_order_seq_cst);
	unsigned int claimed = atomic_load(&burst_guard_claimed);
	if (claimed > BURST_GUARD_SLOTS)
		claimed = BURST_GUARD_SLOTS;
	for (unsigned int i = 0; i < claimed; i++) {
		uint_fast64_t seq = atomic_load_explicit(&burst_guard_slots[i].seq, memory_order_acquire);
		if ((seq & 1) == 0)
			continue;
		/* A burst lasts microseconds, unless its thread lost its CPU: yield it back. */
		while (atomic_load_explicit(&burst_guard_slots[i].seq, memory_order_acquire) == seq)
			sched_yield();
	}
}

int munmap(void *addr, size_t length)
{
	if (rte_thread_is_intr())
		burst_guard_wait();
	return (int)syscall(SYS_munmap, addr, length);
}
