#!/usr/bin/python3
"""Checks a packet trace against the operations a test posted. Reads
tshark's fields, one packet a line: opcode, PSN, destination QP and AETH
syndrome (empty when the packet has no AETH), tab-separated:

  tshark -r T.pcap -T fields -e infiniband.bth.opcode -e infiniband.bth.psn \\
         -e infiniband.bth.destqp -e infiniband.aeth.syndrome | trace_check.py ...

  trace_check.py sends QPN PSN MESSAGES PACKETS   the RC SENDs to QPN are
      MESSAGES messages of PACKETS packets each (First, Middle..., Last, or
      Only), in order, with PSNs PSN, PSN+1, ... (mod 2^24), none twice
  trace_check.py retransmits QPN     some request PSN to QPN is sent again
  trace_check.py naks QPN            some ACK to QPN is a NAK (IBTA 9.7.5.2.8)

Prints what it found; exits 1 when the trace is not so.
"""
import sys

SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0, 1, 2, 4
RC_REQUESTS = set(range(0, 17)) | {19, 20, 21, 22, 23}  # not ACK 17, atomic ACK 18
ACK = 17


def packets():
    for line in sys.stdin:
        f = line.rstrip("\n").split("\t")
        if len(f) < 3 or not f[0]:
            continue
        yield int(f[0], 0), int(f[1], 0), int(f[2], 0), (int(f[3], 0) if len(f) > 3 and f[3] else None)


def expected_sends(messages, per):
    one = [SEND_ONLY] if per == 1 else [SEND_FIRST] + [SEND_MIDDLE] * (per - 2) + [SEND_LAST]
    return one * messages


def sends(qpn, psn, messages, per):
    got = [(op, p) for op, p, dest, _ in packets() if dest == qpn and op in RC_REQUESTS]
    want_ops = expected_sends(messages, per)
    want_psns = [(psn + i) & 0xFFFFFF for i in range(len(want_ops))]
    print(f"{len(got)} requests to QP {qpn:#x}, {len(want_ops)} expected")
    if [op for op, _ in got] != want_ops:
        print("opcodes differ from the operations posted")
        return 1
    if [p for _, p in got] != want_psns:
        print("PSNs are not consecutive from", hex(psn))
        return 1
    return 0


def retransmits(qpn):
    seen, again = set(), 0
    for op, psn, dest, _ in packets():
        if dest == qpn and op in RC_REQUESTS:
            again += psn in seen
            seen.add(psn)
    print(f"{again} request packets to QP {qpn:#x} sent again")
    return 0 if again else 1


def naks(qpn):
    # AETH syndrome bits 6:5 = 11 is a NAK.
    n = sum(1 for op, _, dest, syn in packets() if dest == qpn and op == ACK and syn is not None and syn & 0x60 == 0x60)
    print(f"{n} NAKs to QP {qpn:#x}")
    return 0 if n else 1


def main():
    what, args = sys.argv[1], [int(a, 0) for a in sys.argv[2:]]
    return {"sends": sends, "retransmits": retransmits, "naks": naks}[what](*args)


if __name__ == "__main__":
    sys.exit(main())
