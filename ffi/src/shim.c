#include <stddef.h>
#include <string.h>
#include "shim.h"
#include "burst_guard.h"

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
#ifndef RACEWAY_BURST_GUARD
int shim_guard_bursts(uint16_t port)
{
	(void)port;
	return 0;
}
#endif

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

int shim_pktmbuf_cut(struct rte_mbuf *m, uint32_t len)
{
	if (len > m->pkt_len)
		return -1;
	struct rte_mbuf *last = m;
	uint32_t left = len;
	uint16_t kept = 1;
	/* The segment holding the last byte kept; the first one when len is 0. */
	while (left > last->data_len && last->next != NULL) {
		left -= last->data_len;
		last = last->next;
		kept++;
	}
	struct rte_mbuf *rest = last->next;
	last->data_len = (uint16_t)left;
	last->next = NULL;
	m->nb_segs = kept;
	m->pkt_len = len;
	if (rest != NULL)
		rte_pktmbuf_free(rest);
	return 0;
}
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
