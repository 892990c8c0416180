/* Why a packet from the network was dropped (the RoCEv2 parser's
 * verdicts): each is counted in the port's counters by reason. */
#ifndef URO_DROP_REASON_H
#define URO_DROP_REASON_H

/* Why a packet was dropped: each is counted, none is trusted further. */
enum uro_roce_drop {
	ROCE_OK = 0,
	ROCE_TRUNCATED,	  /* shorter than its headers say */
	ROCE_NOT_ROCE,	  /* not IPv4/IPv6 UDP to port 4791 */
	ROCE_BAD_VERSION, /* BTH TVer is not 0 */
	ROCE_UNKNOWN_OPCODE,
	ROCE_BAD_PAYLOAD, /* payload or pad where the opcode has none */
	ROCE_BAD_ICRC,
	ROCE_DROP_REASONS,
};

#endif
