#!/usr/bin/env python3
"""Tx rate of one ethdev port of a running DPDK process, read over its telemetry socket.

    perf/port_rate.py SOCKET PORT [SECONDS] [WARMUP]

Reads /ethdev/stats,PORT twice, SECONDS apart after WARMUP seconds, and prints the tx rate in
Mpps. For forwarders that print no counters of their own (DPDK's l3fwd example). Exits 2 with
one line on stderr when the socket never appears or answers oddly.
"""
import os
import sys
import time

import perflib


def tx_packets(path, port):
    return perflib.telemetry(path, f"/ethdev/stats,{port}")["/ethdev/stats"]["opackets"]


def main():
    if len(sys.argv) < 3:
        print("usage: port_rate.py SOCKET PORT [SECONDS] [WARMUP]", file=sys.stderr)
        return 2
    path, port = sys.argv[1], int(sys.argv[2])
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 5
    warmup = float(sys.argv[4]) if len(sys.argv) > 4 else 2
    deadline = time.time() + 30
    while not os.path.exists(path):
        if time.time() > deadline:
            print(f"error: {path}: no telemetry socket after 30 s", file=sys.stderr)
            return 2
        time.sleep(0.2)
    time.sleep(warmup)
    try:
        first, start = tx_packets(path, port), time.time()
        time.sleep(seconds)
        last, end = tx_packets(path, port), time.time()
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"error: {path}: /ethdev/stats,{port}: {error}", file=sys.stderr)
        return 2
    print("%.2f" % ((last - first) / (end - start) / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
