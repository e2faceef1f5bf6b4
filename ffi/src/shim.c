#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <rte_interrupts.h>
#include "shim.h"

/* Bursts against a driver's teardown.
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

void shim_guard_bursts(uint16_t port)
{
	if (port < RTE_MAX_ETHPORTS)
		burst_guarded_port[port] = 1;
}

static struct burst_guard_slot *burst_guard_enter(uint16_t port)
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

static void burst_guard_leave(struct burst_guard_slot *slot)
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

uint16_t shim_eth_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct burst_guard_slot *slot = burst_guard_enter(port);
	uint16_t received = rte_eth_rx_burst(port, queue, pkts, n);
	burst_guard_leave(slot);
	return received;
}

uint16_t shim_eth_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	struct burst_guard_slot *slot = burst_guard_enter(port);
	uint16_t sent = rte_eth_tx_burst(port, queue, pkts, n);
	burst_guard_leave(slot);
	return sent;
}
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *pool) { return rte_pktmbuf_alloc(pool); }
void shim_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
void shim_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count) { rte_pktmbuf_free_bulk(mbufs, count); }
/* Keep in step with dpdk_sys::mbuf_offsets (lib.rs): the Rust side reads these fields inline. */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr moved: update mbuf_offsets");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off moved: update mbuf_offsets");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len moved: update mbuf_offsets");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len moved: update mbuf_offsets");

int shim_pktmbuf_linearize_into(const struct rte_mbuf *src, struct rte_mbuf *dst)
{
	uint32_t len = rte_pktmbuf_pkt_len(src);
	if (len > UINT16_MAX)
		return -1;
	char *out = rte_pktmbuf_append(dst, (uint16_t)len);
	if (out == NULL)
		return -1;
	const void *data = rte_pktmbuf_read(src, 0, len, out);
	if (data == NULL)
		return -1;
	if (data != out)
		memcpy(out, data, len);
	dst->port = src->port;
	return 0;
}

const void *shim_pktmbuf_read(const struct rte_mbuf *m, uint32_t off, uint32_t len, void *buf)
{
	return rte_pktmbuf_read(m, off, len, buf);
}

uint8_t *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len) { return (uint8_t *)rte_pktmbuf_append(m, len); }
int shim_errno(void) { return rte_errno; }
unsigned int shim_lcore_id(void) { return rte_lcore_id(); }
uint64_t shim_rdtsc(void) { return rte_rdtsc(); }

int shim_eth_dev_configure(uint16_t port, uint16_t nb_rx, uint16_t nb_tx, uint64_t rss_hf, uint32_t mtu, int scatter, int tx_multi_seg)
{
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = mtu;
	if (scatter)
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
	if (tx_multi_seg)
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	if (nb_rx > 1 && rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_key = NULL; /* the driver's default key */
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	}
	return rte_eth_dev_configure(port, nb_rx, nb_tx, &conf);
}

int shim_eth_tx_multi_seg(uint16_t port)
{
	struct rte_eth_dev_info info;
	int rc = rte_eth_dev_info_get(port, &info);
	if (rc != 0)
		return rc;
	return (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
}

uint64_t shim_rss_ip_udp_tcp(void) { return RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP; }

int shim_eth_dev_info(uint16_t port, uint16_t *max_rx_queues, uint16_t *max_tx_queues, uint64_t *rss_offloads, const char **driver, uint16_t *max_mtu, int *scatter)
{
	struct rte_eth_dev_info info;
	int rc = rte_eth_dev_info_get(port, &info);
	if (rc != 0)
		return rc;
	*max_rx_queues = info.max_rx_queues;
	*max_tx_queues = info.max_tx_queues;
	*rss_offloads = info.flow_type_rss_offloads;
	*driver = info.driver_name;
	/* The largest MTU rte_eth_dev_configure accepts: the device's max_mtu, and its longest
	 * frame less the overhead it counts (as eth_dev_validate_mtu does). */
	uint32_t overhead = (info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu)
		? info.max_rx_pktlen - info.max_mtu : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
	uint32_t by_len = info.max_rx_pktlen > overhead ? info.max_rx_pktlen - overhead : 0;
	*max_mtu = by_len < info.max_mtu ? (uint16_t)by_len : info.max_mtu;
	*scatter = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0;
	return 0;
}

int shim_eth_adjust_desc(uint16_t port, uint16_t *nb_rx_desc, uint16_t *nb_tx_desc) { return rte_eth_dev_adjust_nb_rx_tx_desc(port, nb_rx_desc, nb_tx_desc); }
int shim_eth_rx_queue_setup(uint16_t port, uint16_t queue, uint16_t nb_desc, unsigned int socket, struct rte_mempool *pool) { return rte_eth_rx_queue_setup(port, queue, nb_desc, socket, NULL, pool); }
int shim_eth_tx_queue_setup(uint16_t port, uint16_t queue, uint16_t nb_desc, unsigned int socket) { return rte_eth_tx_queue_setup(port, queue, nb_desc, socket, NULL); }

int shim_eth_link(uint16_t port, int *up, uint32_t *speed_mbps)
{
	struct rte_eth_link link;
	memset(&link, 0, sizeof(link));
	int rc = rte_eth_link_get_nowait(port, &link);
	if (rc != 0)
		return rc;
	*up = link.link_status;
	*speed_mbps = link.link_speed;
	return 0;
}
