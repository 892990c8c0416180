/* Capacities of a uroce device. They size the per-process segment and are
 * what ibv_query_device reports, so the two can never disagree. */
#ifndef URO_LIMITS_H
#define URO_LIMITS_H

/* A QPN is 24 bits (IBTA 9.2 BTH DestQP): 12 bits of registry slot, 12 bits
 * of QP index. Slot 0 is never handed out, so no QPN is 0 or 1 (SMI/GSI). */
#define URO_QPN_INDEX_BITS 12
#define URO_MAX_SLOTS	   (1u << (24 - URO_QPN_INDEX_BITS))
#define URO_MAX_QP	   (1u << URO_QPN_INDEX_BITS)

#define URO_MAX_CQ	  4096
#define URO_MAX_SRQ	  4096
#define URO_MAX_MR	  65536
#define URO_MAX_PD	  65536
#define URO_MAX_AH	  65536
#define URO_MAX_QP_WR	  16384
#define URO_MAX_SRQ_WR	  16384
#define URO_MAX_SGE	  32
#define URO_MAX_CQE	  ((1 << 20) - 1)
#define URO_MAX_INLINE	  256
#define URO_MIN_INLINE	  64  /* what a QP gets even when it asks for less */
#define URO_MAX_RD_ATOMIC 128 /* rxe's (rxe_param.h): perftest asks a peer for its own */
#define URO_MAX_MSG_SZ	  (1u << 31)
/* Multicast attachments (QP, group) a context holds: the table in its
 * segment that senders scan. It bounds the groups and the QPs per group
 * that ibv_query_device reports too. */
#define URO_MAX_MCAST_ATTACH 256
/* A port's GID table is as long as its netdev's addresses need, at least
 * URO_GID_TBL_MIN and at most URO_GID_TBL_MAX (the addresses beyond are
 * not GIDs). */
#define URO_GID_TBL_MIN	    16
#define URO_GID_TBL_MAX	    256
#define URO_PKEY_TBL_LEN    1
#define URO_DEFAULT_PKEY    0xffff
#define URO_NUM_COMP_VEC    1
#define URO_LOCAL_ACK_DELAY 15
#define URO_NAME_MAX	    64

#endif
