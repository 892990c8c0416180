#include "port_counters.h"

#define PORT(n, field)                                                                             \
	{                                                                                          \
		.name = n, .offset = offsetof(struct uro_seg_counters, field)                      \
	}
#define QP(n, field)                                                                               \
	{                                                                                          \
		.name = n, .offset = offsetof(struct uro_seg_qp_counters, field)                   \
	}

/* Soft-RoCE's names where rxe counts the same event (its hw counters, as
 * `rdma statistic show` prints them); packets exist on the wire path only,
 * so the shared-memory path leaves the packet counts at 0. */
const struct uro_counter_desc uro_port_counters[] = {
    PORT("sent_pkts", sent),
    PORT("rcvd_pkts", received),
    PORT("duplicate_request", duplicates),
    PORT("out_of_seq_request", out_of_sequence),
    PORT("rcvd_rnr_err", rnr_naks_received),
    PORT("send_rnr_err", rnr_naks_sent),
    PORT("rcvd_seq_err", seq_naks_received),
    PORT("retry_exceeded_err", retry_exceeded),
    PORT("retry_rnr_exceeded_err", rnr_retry_exceeded),
    PORT("completer_retry_err", retransmits), /* a go-back-N, not a packet */
    PORT("send_err", send_err),
    PORT("rdma_sends", rdma_sends),
    PORT("rdma_recvs", rdma_recvs),
    /* uroce's own */
    PORT("send_seq_err", seq_naks_sent),
    PORT("ack_timeouts", ack_timeouts),
    PORT("forwarded_pkts", forwarded),
    PORT("gso_msgs", gso_msgs),
    PORT("gso_refused", gso_refused),
    PORT("gro_msgs", gro_msgs),
    PORT("no_qp", no_qp),
    PORT("bad_pkey", bad_pkey),
    PORT("qkey_violations", qkey_violations),
    PORT("rx_dropped", rx_dropped),
    PORT("drop_bad_mad", bad_mads),
    PORT("staged_dropped", staged_dropped),
    PORT("drop_truncated", dropped[ROCE_TRUNCATED]),
    PORT("drop_not_roce", dropped[ROCE_NOT_ROCE]),
    PORT("drop_bad_version", dropped[ROCE_BAD_VERSION]),
    PORT("drop_unknown_opcode", dropped[ROCE_UNKNOWN_OPCODE]),
    PORT("drop_bad_payload", dropped[ROCE_BAD_PAYLOAD]),
    PORT("drop_bad_icrc", dropped[ROCE_BAD_ICRC]),
    PORT("injected_loss", injected_loss),
    PORT("injected_dup", injected_dup),
    PORT("injected_reorder", injected_reorder),
    PORT("injected_corrupt", injected_corrupt),
    PORT("injected_delay", injected_delay),
    PORT("injected_rnr", injected_rnr),
    PORT("injected_stall", injected_stall),
};
const unsigned uro_port_counter_count = sizeof(uro_port_counters) / sizeof(uro_port_counters[0]);

const struct uro_counter_desc uro_qp_counters[] = {
    QP("posted-sends", posted_sends), QP("posted-recvs", posted_recvs),
    QP("send-cqes", send_cqes),	      QP("recv-cqes", recv_cqes),
    QP("error-cqes", error_cqes),     QP("retransmits", retransmits),
    QP("rnr-waits", rnr_waits),
};
const unsigned uro_qp_counter_count = sizeof(uro_qp_counters) / sizeof(uro_qp_counters[0]);
