/* Faults a process injects into the RoCEv2 packets it sends: what
 * `tc netem` does to a link, without root and on one host too, plus what
 * only an RDMA device can fake (receivers not ready, a corrupted ICRC).
 * Set by UROCE_FAULTS or `uroce run --faults`:
 *
 *     loss=2%,dup=1%,reorder=5%,corrupt=0.1%,rnr=10%,delay=1ms~200us,seed=7
 *     stall=200ms/2s
 *     loss=5%,type=rc|ud,qpn=0x1000,dev=uroce0
 *
 * Each packet this process sends is lost, corrupted (its ICRC, which the
 * receiver drops and counts), sent twice, held back behind later packets
 * (reorder), or delayed by delay plus or minus up to the jitter after ~
 * (or ±), in order; rnr is the share of SENDs this process's RC responder answers
 * with an RNR NAK although a receive is posted. stall=T/P makes this
 * process a peer that stops answering: for the last T of every period P
 * (counted from its first packet) it sends nothing, so that its peers
 * retry and, when T outlasts their retries, end in IBV_WC_RETRY_EXC_ERR as
 * with a hung host (IBTA 9.7.6.1.3). type, qpn and dev narrow the faults
 * to the packets of those transports (the BTH opcode's, IBTA 9.2), to
 * that destination QP, or to the contexts of that device. Draws come from one
 * generator seeded by seed (default 1): a single-threaded program meets
 * the same faults on every run. */
#ifndef URO_FAULTS_H
#define URO_FAULTS_H

#include <stddef.h>
#include <stdint.h>

/* Probabilities are in parts per million. */
struct uro_fault_spec {
	uint32_t loss, dup, reorder, corrupt, rnr;
	uint64_t delay_ns, jitter_ns;
	uint64_t stall_ns, stall_period_ns; /* 0: no stall */
	uint32_t types;			    /* bit (1 << BTH opcode's transport); 0: every one */
	uint32_t qpn;			    /* the destination QP; all ones: every one */
	char dev[64];			    /* the device; empty: every one */
	uint64_t seed;
};

/* Parses spec: 0, or -1 with what is wrong in err. */
int uro_faults_parse(const char *spec, struct uro_fault_spec *f, char *err, size_t errlen);

/* A draw of the generator at *state: whether an event of ppm happens. */
int uro_faults_hit(uint64_t *state, uint32_t ppm);
/* Whether a packet of that opcode to dest_qpn takes the faults. */
int uro_faults_scoped(const struct uro_fault_spec *f, uint8_t opcode, uint32_t dest_qpn);
/* Whether the process is silent at `since_first` ns after its first
 * packet. */
int uro_faults_stalled(const struct uro_fault_spec *f, uint64_t since_first);
/* A uniform draw in [0, n). */
uint64_t uro_faults_below(uint64_t *state, uint64_t n);

#endif
