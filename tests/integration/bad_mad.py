#!/usr/bin/python3
"""Sends one CM REQ that no CM could have sent (every field of its body
0: no communication ID, QPN 0, no rdma_cm header) to QP 1 of ADDR, as a
UD SEND Only with the GSI's Q_Key, from SRC. A host must drop it, count
it, and answer nothing (Linux's cm.c drops what it cannot take).

usage: bad_mad.py SRC ADDR
"""
import socket
import sys

from scapy.all import IP, UDP, Raw
from scapy.contrib.roce import BTH

UD_SEND_ONLY = 0x64
GSI_QKEY = 0x80010000
CM_ATTR_REQ = 0x0010
IP_MTU_DISCOVER, IP_PMTUDISC_DO = 10, 2  # ip(7), <linux/in.h>


def main():
    src, addr = sys.argv[1], sys.argv[2]
    # The MAD header Linux's CM speaks: base version 1, class 7 (CM),
    # class version 2, method Send; a transaction ID; attribute REQ.
    mad = bytes([1, 7, 2, 3]) + bytes(4) + (0x1234).to_bytes(8, "big")
    mad += CM_ATTR_REQ.to_bytes(2, "big") + bytes(6)
    mad += bytes(256 - len(mad))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Never fragmented, as uroce's sockets: Linux then sends DF with
    # identification 0, the header the ICRC below is computed over (with
    # the default, IP_PMTUDISC_WANT, it numbers the datagram, and the
    # capture's ICRC check in test_wire.sh found it wrong).
    udp.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
    udp.bind((src, 0))
    sport = udp.getsockname()[1]
    # The ICRC covers the IPv4 header the kernel writes for an unconnected
    # socket: DF, identification 0.
    # scapy has no DETH: its Q_Key, a reserved byte, the source QP.
    deth = GSI_QKEY.to_bytes(4, "big") + bytes(1) + (1).to_bytes(3, "big")
    pkt = (IP(src=src, dst=addr, flags="DF", id=0) / UDP(sport=sport, dport=4791) /
           BTH(opcode=UD_SEND_ONLY, dqpn=1, psn=0) / Raw(deth + mad))
    udp.sendto(bytes(pkt[UDP].payload), (addr, 4791))
    udp.settimeout(2.0)
    try:
        udp.recvfrom(65536)
        print("answered")
    except socket.timeout:
        print("no answer")


if __name__ == "__main__":
    main()
