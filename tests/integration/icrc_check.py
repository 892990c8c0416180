#!/usr/bin/python3
"""Recomputes the ICRC of every RoCEv2 packet of a capture with scapy's
RoCE layer (scapy.contrib.roce), code uroce did not write, and compares it
with the one on the wire. Prints the counts; exits 1 on any mismatch or
when the capture holds no RoCEv2 packet.

scapy 2.5 computes the ICRC over IPv4 only. Over IPv6 this does what it
does over IPv4, with IBTA A17.8's masks for IPv6 (traffic class, flow
label and hop limit all ones): scapy's layers build the masked headers,
zlib's CRC-32 sums them.

usage: icrc_check.py CAPTURE [EVERY]   (EVERY: check one frame in EVERY,
which bounds the time scapy takes on a long capture)
"""
import sys
import zlib

from scapy.all import IP, IPv6, Ether, Raw, RawPcapReader, UDP, raw
from scapy.contrib.roce import BTH


def ipv6_icrc(pkt):
    masked = Raw(b"\xff" * 8) / pkt[IPv6].copy()
    masked[IPv6].tc = 0xFF
    masked[IPv6].fl = 0xFFFFF
    masked[IPv6].hlim = 0xFF
    masked[UDP].chksum = 0xFFFF
    masked[BTH].fecn = 1
    masked[BTH].becn = 1
    masked[BTH].resv6 = 0x3F
    return (zlib.crc32(raw(masked)[:-4]) & 0xFFFFFFFF).to_bytes(4, "little")


def icrc(pkt):
    return ipv6_icrc(pkt) if IPv6 in pkt else pkt[BTH].compute_icrc(None)


def main():
    path = sys.argv[1]
    every = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    checked = bad = v6 = 0
    reader = RawPcapReader(path)
    for n, (frame, _) in enumerate(reader):
        if n % every:
            continue
        # tcpdump's captures are Ethernet; uroce's own traces raw IP (101).
        if reader.linktype != 101:
            pkt = Ether(frame)
        else:
            pkt = IPv6(frame) if frame[0] >> 4 == 6 else IP(frame)
        if BTH not in pkt:
            continue
        checked += 1
        v6 += IPv6 in pkt
        wire = bytes(pkt[UDP].payload)[-4:]
        if icrc(pkt) != wire:
            bad += 1
            if bad <= 5:
                print("ICRC mismatch:", pkt.summary(), file=sys.stderr)
    print(f"{checked} RoCEv2 ICRCs recomputed (one frame in {every}; {v6} over IPv6), "
          f"{bad} mismatched")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
