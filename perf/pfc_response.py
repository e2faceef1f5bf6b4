#!/usr/bin/env python3
"""The live PFC response from a raceway capture of one port (perf/pfc-response.sh).

Reads the pcapng raceway's --capture wrote (inbound and outbound frames, ns timestamps taken
when a frame was read or handed to the tx queue), replays the shaper's link schedule for the
outbound frames at the port's speed (a frame starts on the wire when the link is free and it
has been handed over; it takes its wire time, padding and 24 bytes of overhead included),
and for each inbound XOFF for priority 3 reports when the last TC3 frame handed before it
leaves the wire, counted from the moment raceway read the XOFF.

    perf/pfc_response.py CAPTURE.pcapng SPEED_GBPS
"""
import struct
import sys


def packets(path):
    """(ns, inbound, frame) for every enhanced packet block."""
    data = open(path, "rb").read()
    offset = 0
    while offset + 8 <= len(data):
        block_type, length = struct.unpack_from("<II", data, offset)
        body = data[offset + 8 : offset + length - 4]
        if block_type == 6:
            _, high, low, captured, _ = struct.unpack_from("<IIIII", body)
            frame = body[20 : 20 + captured]
            flags, option = 0, 20 + (captured + 3) // 4 * 4
            while option + 4 <= len(body):
                code, size = struct.unpack_from("<HH", body, option)
                if code == 0:
                    break
                if code == 2:
                    flags = struct.unpack_from("<I", body, option + 4)[0]
                option += 4 + (size + 3) // 4 * 4
            yield (high << 32) | low, flags & 3 == 1, frame
        offset += length


SLACK_NS = 20_000


# 802.3 31B.3.7's PFC response by speed, (Mb/s, pause quanta): config/plan.rs's table.
NIC_RESPONSE_QUANTA = [(100, 1), (1_000, 2), (10_000, 67), (25_000, 80), (40_000, 118), (50_000, 147),
                       (100_000, 394), (200_000, 453), (400_000, 905), (800_000, 905)]


def nic_response_quanta(speed_mbps):
    """The allowance at the next listed speed at or above `speed_mbps` (the fastest's above them)."""
    return next((q for s, q in NIC_RESPONSE_QUANTA if s >= speed_mbps), NIC_RESPONSE_QUANTA[-1][1])


def main():
    path, speed_gbps = sys.argv[1], float(sys.argv[2])
    wire_ns = lambda length: (max(length, 60) + 24) * 8 / speed_gbps
    link_free = 0.0
    last_tc3_end = None
    responses, handed_while_paused, paused_until = [], 0, 0.0
    quantum_ns = 512 / speed_gbps
    sum_bits, first_ns, last_ns = 0, None, 0
    for ns, inbound, frame in sorted(packets(path), key=lambda p: p[0]):
        is_pfc = frame[12:14] == b"\x88\x08" and frame[14:16] == b"\x01\x01"
        if inbound:
            if is_pfc and frame[17] & 0x08:
                time = struct.unpack_from(">H", frame, 14 + 4 + 6)[0]
                if time:
                    if ns >= paused_until and last_tc3_end is not None:
                        responses.append(max(0.0, last_tc3_end - ns))
                    paused_until = ns + time * quantum_ns
                else:
                    paused_until = ns
            continue
        first_ns = ns if first_ns is None else first_ns
        last_ns = ns
        sum_bits += (max(len(frame), 60) + 24) * 8
        start = max(link_free, ns)
        link_free = start + wire_ns(len(frame))
        if not is_pfc and len(frame) > 15 and frame[15] >> 2 == 26:
            last_tc3_end = link_free
            # raceway times a pause from the start of the poll loop that read it, the capture
            # from the read itself: allow one loop (20 us) before the pause's end.
            if ns < paused_until - SLACK_NS:
                handed_while_paused += 1
    if not responses:
        sys.exit("no XOFF met a backlogged TC3 queue: nothing to measure")
    responses.sort()
    pick = lambda q: responses[min(len(responses) - 1, int(q * len(responses)))] / 1000
    # The auto headroom's peer response (plan::peer_response_wire_bytes): the longer of a
    # NIC's 802.3 31B.3.7 quanta for the speed (64 wire bytes each) and raceway's lookahead,
    # 32 x 1542 wire bytes.
    quanta = nic_response_quanta(speed_gbps * 1000)
    nic_us = quanta * quantum_ns / 1000
    budget = max(quanta * 64, 32 * 1542) * 8 / speed_gbps / 1000
    print(f"{len(responses)} XOFFs at {speed_gbps:g} Gb/s; last TC3 frame leaves the wire after the XOFF was read:")
    print(f"  p50 {pick(0.5):.2f} us, p99 {pick(0.99):.2f} us, max {responses[-1] / 1000:.2f} us "
          f"(allowed {budget:.2f} us; a NIC's {quanta} quanta: {nic_us:.2f} us); TC3 frames handed to the NIC while paused: {handed_while_paused}")
    out_gbps = sum_bits / max(1.0, last_ns - first_ns)
    print(f"  the port sent {out_gbps:.2f} Gb/s (it must be backlogged at its speed for the schedule to hold)")


if __name__ == "__main__":
    main()
