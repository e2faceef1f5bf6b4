/* One-line C wrappers for the parts of DPDK's API that are static inline or macros, so that
 * Rust can call them as ordinary symbols. Each wrapper does nothing but forward, except the
 * rx/tx bursts, which also mark guarded ports' bursts for the process's munmap
 * (burst_guard.c, with the `burst-guard` feature). */
#ifndef RACEWAY_SHIM_H
#define RACEWAY_SHIM_H

#include <stdint.h>
#include <rte_eal.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_launch.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_telemetry.h>
#include <rte_pdump.h>

/* Bursts on a guarded port finish before the driver unmaps their memory on the interrupt
 * thread (burst_guard.c says why); call before the port starts, for drivers that need it.
 * 1 when the port is guarded, 0 when this build has no guard (no `burst-guard` feature). */
int shim_guard_bursts(uint16_t port);
uint16_t shim_eth_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t shim_eth_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *pool);
void shim_pktmbuf_free(struct rte_mbuf *m);
void shim_pktmbuf_free_bulk(struct rte_mbuf **mbufs, unsigned int count);
uint8_t *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
/* Cuts the frame to its first `len` bytes, freeing the segments wholly past them (packet
 * trimming): 0, or -1 when the frame is shorter than `len` (left as it was). */
int shim_pktmbuf_cut(struct rte_mbuf *m, uint32_t len);
/* Copies the whole frame of a (chained) mbuf into the empty single-segment mbuf dst, and its
 * port: 0, or -1 when dst has too little room. src is left as it was. */
int shim_pktmbuf_linearize_into(const struct rte_mbuf *src, struct rte_mbuf *dst);
/* The frame's `len` bytes from `off`: a pointer into the mbuf when they are in one segment,
 * else copied into `buf`; NULL when the frame is shorter. */
const void *shim_pktmbuf_read(const struct rte_mbuf *m, uint32_t off, uint32_t len, void *buf);
int shim_errno(void);
unsigned int shim_lcore_id(void);
uint64_t shim_rdtsc(void);
/* rte_eth_conf and rte_eth_dev_info are large unions; building them in C keeps the bindings
 * narrow. Configures nb_rx/nb_tx queues with defaults, plus RSS over the hash types rss_hf
 * when nb_rx > 1 and rss_hf != 0, the MTU (0: the driver's default) and, when scatter is
 * set, rx of frames larger than an mbuf as chains. Returns the negative errno from
 * rte_eth_dev_configure. */
int shim_eth_dev_configure(uint16_t port, uint16_t nb_rx, uint16_t nb_tx, uint64_t rss_hf, uint32_t mtu, int scatter, int tx_multi_seg);
/* 1 when the device sends chained mbufs (RTE_ETH_TX_OFFLOAD_MULTI_SEGS), 0 when not, < 0 on error. */
int shim_eth_tx_multi_seg(uint16_t port);
/* The RSS hash types raceway asks for: IPv4/IPv6 addresses, UDP and TCP ports. */
uint64_t shim_rss_ip_udp_tcp(void);
/* Fills max queue counts, the RSS hash types the device offers, the driver name (a static
 * string owned by DPDK), the largest MTU it takes and whether it can scatter rx over chains. */
int shim_eth_dev_info(uint16_t port, uint16_t *max_rx_queues, uint16_t *max_tx_queues, uint64_t *rss_offloads, const char **driver, uint16_t *max_mtu, int *scatter);
int shim_eth_adjust_desc(uint16_t port, uint16_t *nb_rx_desc, uint16_t *nb_tx_desc);
int shim_eth_rx_queue_setup(uint16_t port, uint16_t queue, uint16_t nb_desc, unsigned int socket, struct rte_mempool *pool);
int shim_eth_tx_queue_setup(uint16_t port, uint16_t queue, uint16_t nb_desc, unsigned int socket);
/* Link status without waiting: 1 up / 0 down; speed in Mb/s. */
int shim_eth_link(uint16_t port, int *up, uint32_t *speed_mbps);

#endif
