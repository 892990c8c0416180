#include "device_model.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "uroce_version.h"

/* Worst-case RoCEv2 overhead on the wire: IPv6 (40) + UDP (8) + BTH (12) +
 * the largest extension header, RETH (16) + ICRC (4). */
#define ROCE_V2_OVERHEAD 80

unsigned uro_mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;
}

enum ibv_mtu uro_mtu_for_netdev(unsigned netdev_mtu)
{
	enum ibv_mtu best = IBV_MTU_256;

	for (enum ibv_mtu m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (uro_mtu_bytes(m) + ROCE_V2_OVERHEAD <= netdev_mtu)
			best = m;
	return best;
}

/* 16 bits that tell links apart: FNV-1a of the link's name, folded. */
static uint16_t name_tag(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return (uint16_t)(h ^ (h >> 16));
}

/* A modified EUI-64 from the MAC (RFC 4291 appendix A), as RoCE HCAs build
 * theirs, with the link's name in the two bytes EUI-64 fixes at ff:fe:
 * several links share one netdev (lo's MAC is all zeros), and each needs a
 * GUID of its own, the same every time it opens (an IB link's GID is made
 * of it). Two names on one netdev collide with probability 2^-16. */
static uint64_t guid_for_link(const uint8_t mac[6], const char *link_name)
{
	uint16_t tag = name_tag(link_name);
	const uint8_t b[8] = {(uint8_t)(mac[0] ^ 0x02),
			      mac[1],
			      mac[2],
			      (uint8_t)(tag >> 8),
			      (uint8_t)tag,
			      mac[3],
			      mac[4],
			      mac[5]};
	uint64_t g = 0;

	for (int i = 0; i < 8; i++)
		g = (g << 8) | b[i];
	return g;
}

static void add_gid(struct uro_device_model *m, const uint8_t raw[16], enum ibv_gid_type type)
{
	if (m->ngids == URO_GID_TBL_MAX)
		return;
	memcpy(m->gids[m->ngids].gid.raw, raw, 16);
	m->gids[m->ngids].type = type;
	m->ngids++;
}

/* RoCEv2 GIDs are the netdev's IP addresses, IPv4 as ::ffff:a.b.c.d
 * (IBTA Annex A17.2). */
static const uint8_t ipv4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

void uro_gid_from_ip(union ibv_gid *gid, int family, const void *addr)
{
	if (family == AF_INET6) {
		memcpy(gid->raw, addr, 16);
		return;
	}
	memcpy(gid->raw, ipv4_mapped_prefix, sizeof(ipv4_mapped_prefix));
	memcpy(gid->raw + 12, addr, 4);
}

int uro_gid_is_ipv4_mapped(const union ibv_gid *gid)
{
	return !memcmp(gid->raw, ipv4_mapped_prefix, sizeof(ipv4_mapped_prefix));
}

/* The MGIDs a RoCE port can join, as the kernel's verbs layer checks them:
 * an IPv6 multicast address (ff00::/8) or an IPv4-mapped one
 * (::ffff:224.0.0.0/4). */
int uro_gid_is_multicast(const union ibv_gid *gid)
{
	if (gid->raw[0] == 0xff)
		return 1;
	return uro_gid_is_ipv4_mapped(gid) && (gid->raw[12] & 0xf0) == 0xe0;
}

static void build_roce_gids(struct uro_device_model *m)
{
	for (int i = 0; i < m->netdev.naddrs; i++) {
		union ibv_gid gid;

		uro_gid_from_ip(&gid, m->netdev.addrs[i].family, m->netdev.addrs[i].addr);
		add_gid(m, gid.raw, IBV_GID_TYPE_ROCE_V2);
	}
}

/* An IB port's GID[0] is the link-local prefix fe80::/64 with the port GUID
 * (IBTA 4.1.1). */
static void build_ib_gids(struct uro_device_model *m)
{
	uint8_t raw[16] = {0xfe, 0x80};
	uint64_t be = __builtin_bswap64(m->node_guid);

	memcpy(raw + 8, &be, 8);
	add_gid(m, raw, IBV_GID_TYPE_IB);
}

void uro_port_set_running(struct ibv_port_attr *p, int running)
{
	p->state = running ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	p->phys_state = running ? 5 /* LinkUp */ : 3 /* Disabled */;
}

static void build_port(struct uro_device_model *m)
{
	struct ibv_port_attr *p = &m->port;
	int ib = m->link.type == URO_LINK_IB;

	memset(p, 0, sizeof(*p));
	uro_port_set_running(p, m->netdev.running);
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = uro_mtu_for_netdev(m->netdev.mtu);
	p->gid_tbl_len = URO_GID_TBL_MIN; /* grown to the GIDs in uro_device_model_build */
	p->port_cap_flags = ib ? 0 : IBV_PORT_IP_BASED_GIDS;
	p->max_msg_sz = URO_MAX_MSG_SZ;
	p->pkey_tbl_len = URO_PKEY_TBL_LEN;
	p->lid = ib ? m->link.lid : 0;
	p->sm_lid = 0;
	p->lmc = 0;
	p->max_vl_num = 1;    /* encoded: 1 = VL0 only */
	p->active_width = 2;  /* 4X */
	p->active_speed = 32; /* EDR: 4X EDR ~ what shared memory moves */
	p->link_layer = ib ? IBV_LINK_LAYER_INFINIBAND : IBV_LINK_LAYER_ETHERNET;
}

void uro_device_model_build(const struct uro_link *link, struct uro_device_model *m)
{
	memset(m, 0, sizeof(*m));
	m->link = *link;
	m->netdev_present = uro_netdev_query(link->netdev, &m->netdev) == 0;
	m->node_guid = guid_for_link(m->netdev.mac, link->name);
	build_port(m);
	if (link->type == URO_LINK_IB)
		build_ib_gids(m);
	else
		build_roce_gids(m);
	if (m->ngids > URO_GID_TBL_MIN)
		m->port.gid_tbl_len = m->ngids;
}

int uro_gid_find(const struct uro_device_model *m, const union ibv_gid *gid)
{
	for (int i = 0; i < m->ngids; i++)
		if (!memcmp(m->gids[i].gid.raw, gid->raw, 16))
			return i;
	return -1;
}

/* Only capabilities uroce really provides are advertised. */
void uro_device_attr(const struct uro_device_model *m, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	/* As a NIC reports its firmware's: the version of what plays the NIC. */
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", UROCE_VERSION_FULL);
	a->node_guid = __builtin_bswap64(m->node_guid);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xffffff; /* what Soft-RoCE reports: no IEEE OUI */
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = URO_MAX_QP;
	a->max_qp_wr = URO_MAX_QP_WR;
	/* Only what uroce does: Q_Key violations are counted, and port
	 * events follow the netdev (src/verbs/port_watch.c). Not claimed:
	 * P_Key violations (not counted yet), SRQ resizing, and the
	 * memory-management extensions, whose fast registration and reserved
	 * L_Key uroce lacks (IBTA 10.6.3.5), though Soft-RoCE claims them. */
	a->device_cap_flags = IBV_DEVICE_CURR_QP_STATE_MOD | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_XRC;
	a->max_sge = URO_MAX_SGE;
	a->max_sge_rd = URO_MAX_SGE;
	a->max_cq = URO_MAX_CQ;
	a->max_cqe = URO_MAX_CQE;
	a->max_mr = URO_MAX_MR;
	a->max_pd = URO_MAX_PD;
	a->max_qp_rd_atom = URO_MAX_RD_ATOMIC;
	a->max_res_rd_atom = URO_MAX_RD_ATOMIC * URO_MAX_QP;
	a->max_qp_init_rd_atom = URO_MAX_RD_ATOMIC;
	/* Atomics serialise on a lock in the target's segment: atomic with
	 * respect to every other atomic through uroce, not to the CPU. */
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = URO_MAX_AH;
	/* One table of attachments per context bounds all three (IBTA
	 * 11.2.1.2: groups, QPs per group, attachments in all). */
	a->max_mcast_grp = URO_MAX_MCAST_ATTACH;
	a->max_mcast_qp_attach = URO_MAX_MCAST_ATTACH;
	a->max_total_mcast_qp_attach = URO_MAX_MCAST_ATTACH;
	a->max_mw = URO_MAX_MR; /* windows share the key table with regions */
	a->max_srq = URO_MAX_SRQ;
	a->max_srq_wr = URO_MAX_SRQ_WR;
	a->max_srq_sge = URO_MAX_SGE;
	a->max_pkeys = URO_PKEY_TBL_LEN;
	a->local_ca_ack_delay = URO_LOCAL_ACK_DELAY;
	a->phys_port_cnt = 1;
}

void uro_device_attr_ex(const struct uro_device_model *m, struct ibv_device_attr_ex *a)
{
	memset(a, 0, sizeof(*a));
	uro_device_attr(m, &a->orig_attr);
	a->device_cap_flags_ex = a->orig_attr.device_cap_flags;
	/* Nothing is ever pinned: every region behaves as on-demand paging
	 * does, including the implicit whole-address-space region. */
	a->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a->odp_caps.per_transport_caps.rc_odp_caps =
	    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
	    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	a->odp_caps.per_transport_caps.uc_odp_caps =
	    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
	a->odp_caps.per_transport_caps.ud_odp_caps =
	    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	a->xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			  IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	a->max_dm_size = 0;
	a->phys_port_cnt_ex = 1;
}
