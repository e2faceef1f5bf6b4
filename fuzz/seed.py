#!/usr/bin/env python3
"""Seeds the fuzz corpora from traces that `raceway gen` writes and the shipped configs.

    fuzz/seed.py RACEWAY_BINARY SEED_DIR

SEED_DIR/wire: one frame per file (mixed host traffic: RoCEv2, CNP, TCP, IPv6, VLAN, bad
frames; an incast; a PFC storm). SEED_DIR/pipeline: the same frames as pipeline records,
received on changing ports with transmits in between. SEED_DIR/config: config/*.toml.
"""
import os
import struct
import subprocess
import sys
import tempfile


def frames(pcap_path):
    with open(pcap_path, "rb") as handle:
        data = handle.read()
    # Either byte order (raceway writes big-endian, nanosecond pcap).
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    offset = 24
    while offset + 16 <= len(data):
        incl = struct.unpack_from(order + "I", data, offset + 8)[0]
        yield data[offset + 16: offset + 16 + incl]
        offset += 16 + incl


def main():
    raceway, seeds = sys.argv[1], sys.argv[2]
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for target in ("wire", "pipeline", "config"):
        os.makedirs(os.path.join(seeds, target), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        def gen(*args):
            subprocess.run([raceway, "gen", *args], check=True, stdout=subprocess.DEVNULL)
        gen("mixed", "--out", f"{tmp}/mixed.pcap", "--packets", "300", "--seed", "1", "--bad-percent", "10")
        gen("mixed", "--out", f"{tmp}/mixed-big.pcap", "--packets", "100", "--seed", "2", "--size", "1500")
        gen("incast", "--out", f"{tmp}/incast", "--hosts", "3", "--messages", "1", "--message-bytes", "4000")
        gen("pfc-storm", "--out", f"{tmp}/storm", "--hosts", "2", "--duration-us", "50")
        traces = [f"{tmp}/mixed.pcap", f"{tmp}/mixed-big.pcap", f"{tmp}/incast/host1.pcap",
                  f"{tmp}/storm/host0.pcap"]
        all_frames = [frame for trace in traces for frame in frames(trace)]
    for index, frame in enumerate(all_frames):
        with open(os.path.join(seeds, "wire", f"frame-{index:04}"), "wb") as handle:
            handle.write(frame)
    # Pipeline records: [op][port][step_ns u16][len u16][bytes], 40 frames per seed.
    for seed in range(0, len(all_frames), 40):
        record = bytearray()
        for index, frame in enumerate(all_frames[seed:seed + 40]):
            record += struct.pack("<BBHH", 0, index % 4, 50, len(frame)) + frame
            if index % 3 == 2:
                record += struct.pack("<BBHH", 1, (index + 1) % 4, 10, 0)
        with open(os.path.join(seeds, "pipeline", f"records-{seed:04}"), "wb") as handle:
            handle.write(record)
    config_dir = os.path.join(root, "config")
    for name in sorted(os.listdir(config_dir)):
        if name.endswith(".toml"):
            with open(os.path.join(config_dir, name), "rb") as source:
                text = source.read()
            with open(os.path.join(seeds, "config", name), "wb") as handle:
                handle.write(text)


if __name__ == "__main__":
    main()
