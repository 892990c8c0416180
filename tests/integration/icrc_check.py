#!/usr/bin/python3
"""Recomputes the ICRC of every RoCEv2 packet of a capture with scapy's
RoCE layer (scapy.contrib.roce), code uroce did not write, and compares it
with the one on the wire. Prints the counts; exits 1 on any mismatch or
when the capture holds no RoCEv2 packet.

usage: icrc_check.py CAPTURE [EVERY]   (EVERY: check one frame in EVERY,
which bounds the time scapy takes on a long capture)
"""
import sys

from scapy.all import IP, Ether, RawPcapReader, UDP
from scapy.contrib.roce import BTH


def main():
    path = sys.argv[1]
    every = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    checked = bad = 0
    reader = RawPcapReader(path)
    # tcpdump's captures are Ethernet; uroce's own traces raw IP (101).
    layer = IP if reader.linktype == 101 else Ether
    for n, (frame, _) in enumerate(reader):
        if n % every:
            continue
        pkt = layer(frame)
        if BTH not in pkt:
            continue
        checked += 1
        wire = bytes(pkt[UDP].payload)[-4:]
        if pkt[BTH].compute_icrc(None) != wire:
            bad += 1
            if bad <= 5:
                print("ICRC mismatch:", pkt.summary(), file=sys.stderr)
    print(f"{checked} RoCEv2 ICRCs recomputed (one frame in {every}), {bad} mismatched")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
