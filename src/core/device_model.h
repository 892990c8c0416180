/* A soft HCA modelled on a link and its netdev: what ibv_query_device,
 * ibv_query_port and the GID queries report (docs/design.md, A device is a
 * soft RoCE HCA bound to a netdev). */
#ifndef URO_DEVICE_MODEL_H
#define URO_DEVICE_MODEL_H

#include <infiniband/verbs.h>

#include "config.h"
#include "netdev.h"

struct uro_gid {
	union ibv_gid gid;
	enum ibv_gid_type type;
};

struct uro_device_model {
	struct uro_link link;
	struct uro_netdev netdev;
	int netdev_present;
	uint64_t node_guid; /* host byte order */
	struct ibv_port_attr port;
	int ngids;
	struct uro_gid gids[URO_GID_TBL_MAX];
};

void uro_device_model_build(const struct uro_link *link, struct uro_device_model *m);
void uro_device_attr(const struct uro_device_model *m, struct ibv_device_attr *attr);
void uro_device_attr_ex(const struct uro_device_model *m, struct ibv_device_attr_ex *attr);

/* A port's state and physical state as its netdev's being up and running
 * says, as Soft-RoCE derives them. */
void uro_port_set_running(struct ibv_port_attr *p, int running);

/* The largest IB MTU whose RoCEv2 packet fits in a netdev MTU. */
enum ibv_mtu uro_mtu_for_netdev(unsigned netdev_mtu);
unsigned uro_mtu_bytes(enum ibv_mtu mtu);

/* A RoCEv2 GID for an IP address: an IPv6 address as it is, an IPv4 one
 * as ::ffff:a.b.c.d (IBTA Annex A17.2). family is AF_INET or AF_INET6. */
void uro_gid_from_ip(union ibv_gid *gid, int family, const void *addr);
int uro_gid_is_ipv4_mapped(const union ibv_gid *gid);
int uro_gid_is_multicast(const union ibv_gid *gid);
#define URO_MCAST_QPN 0xffffffu /* IBTA 10.5.2.1: the multicast DestQP */

/* Index of gid in the table, or -1. */
int uro_gid_find(const struct uro_device_model *m, const union ibv_gid *gid);

#endif
