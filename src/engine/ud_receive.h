/* What a UD receive holds, whichever transport brought the datagram
 * (ud_receive.c). */
#ifndef URO_UD_RECEIVE_H
#define URO_UD_RECEIVE_H

#include <stdint.h>
#include <sys/uio.h>

#include "objects.h"

#define URO_GRH_BYTES 40

/* The 40-byte GRH area of a UD receive of len payload bytes over RoCEv2
 * from src to dst (IPv4 or IPv6, by the GIDs; traffic class 0, hop limit
 * 64), and the SL that says which (datagram.c). */
void uro_roce_grh(uint8_t *g, const union ibv_gid *src, const union ibv_gid *dst, uint64_t len);
uint8_t uro_roce_received_sl(int ipv4);
/* Places a datagram, its 40-byte GRH area grh then len payload bytes, in
 * receive r of UD QP t of process p: a struct ibv_wc status, or -1 when
 * the process is gone and the datagram lost. */
int uro_ud_land(struct uro_peer *p, const struct uro_seg_qp *t, const struct uro_recv *r,
		const uint8_t *grh, const struct iovec *payload, int n, uint64_t len);
/* The GRH area and the SL of a datagram sent through ah from this
 * context, as its receiver finds them. */
void uro_ah_grh(struct uro_context *ctx, const struct uro_ah *ah, uint64_t len,
		uint8_t g[URO_GRH_BYTES]);
uint8_t uro_ah_received_sl(const struct uro_context *ctx, const struct uro_ah *ah);

#endif
