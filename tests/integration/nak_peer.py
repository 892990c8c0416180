#!/usr/bin/python3
"""A RoCEv2 peer that answers every request with a PSN sequence error NAK
at the first PSN it was told of, as a broken or hostile responder could do
for ever: the requester must spend its retry count on them and end in
IBV_WC_RETRY_EXC_ERR (IBTA 9.7.5.2.8), not retransmit without end. With
COPIES 2 each NAK is sent twice, as a network that duplicates packets
would: a copy must not be paid for twice.

It plays ibv_rc_pingpong's server for the exchange of QP numbers over TCP
(the client's "lid:qpn:psn:gid" line, ours back, then the client's
"done"), then answers on UDP port 4791 of ADDR. Stops when the requester
has been quiet for a second, or after LIMIT NAKs; prints how many it sent.

usage: nak_peer.py ADDR PORT [LIMIT] [COPIES]
"""
import socket
import sys

from scapy.all import IP, UDP
from scapy.contrib.roce import AETH, BTH

RC_ACKNOWLEDGE = 0x11
NAK_PSN_SEQUENCE = 0x60  # AETH syndrome: NAK, code 0 (IBTA 9.3.3.3.1)
MSG_LEN = len("0000:000000:000000:00000000000000000000000000000000") + 1


def exchange(addr, port):
    """The client's QPN and first PSN, and its address."""
    lst = socket.create_server((addr, port))
    conn, (peer, _) = lst.accept()
    conn.settimeout(10)
    msg = b""
    while len(msg) < MSG_LEN:
        msg += conn.recv(MSG_LEN - len(msg))
    _, qpn, psn, _ = msg.rstrip(b"\0").decode().split(":")
    gid = "00000000000000000000ffff" + socket.inet_aton(addr).hex()
    conn.sendall(f"0000:000abc:000000:{gid}".encode() + b"\0")
    conn.recv(16)  # "done"
    conn.close()
    lst.close()
    return int(qpn, 16), int(psn, 16), peer


def main():
    addr, port = sys.argv[1], int(sys.argv[2])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    copies = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((addr, 4791))
    qpn, psn, peer = exchange(addr, port)
    udp.settimeout(1.0)
    naks = 0
    while naks < limit:
        try:
            _, (src, sport) = udp.recvfrom(65536)
        except socket.timeout:
            break
        # The ICRC covers the IPv4 header the kernel will write for this
        # unconnected socket: DF, identification 0 (TTL and TOS masked).
        nak = (IP(src=addr, dst=src, flags="DF", id=0) / UDP(sport=4791, dport=4791) /
               BTH(opcode=RC_ACKNOWLEDGE, dqpn=qpn, psn=psn) /
               AETH(syndrome=NAK_PSN_SEQUENCE, msn=0))
        for _ in range(copies):
            udp.sendto(bytes(nak[UDP].payload), (src, 4791))
            naks += 1
    print(f"{naks} sequence error NAKs sent")


if __name__ == "__main__":
    main()
