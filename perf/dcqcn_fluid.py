#!/usr/bin/env python3
"""DCQCN's fluid model (Zhu et al., "ECN or Delay: Lessons Learnt from Analysis of DCQCN and
TIMELY", CoNEXT 2016, equations 1-5) against `raceway fabric`: N senders at line rate into one
100G port, from the same start. Prints, for the model and for raceway: when the bottleneck
carries 95% of line rate again after the first cuts idled it, its mean utilisation, and the
steady queue (the median over the run's second half).

The model is the paper's: per-packet marking p(q) (RED between kmin and kmax, up to pmax),
a CNP per tau when any packet in it was marked, alpha's EWMA, fast recovery for F stages and
additive steps after, by timer (T) and byte counter (B). It has no hyper increase; raceway
does (`hyper_increase_mbps`), and the rows say so. Euler steps of 10 ns; the feedback delay
is the marks' way back to the sender (a few microseconds here).

    perf/dcqcn_fluid.py RACEWAY FABRIC_FILE PRESET N...
    DCQCN_EXTRA="hyper_increase_mbps = 0.0" perf/dcqcn_fluid.py ...   # more [dcqcn] keys, ';' apart
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

LINE_GBPS = 100.0
PAYLOAD = 4096
FRAME = PAYLOAD + 58  # RoCEv2 headers: what the byte counter counts
WIRE = FRAME + 24  # FCS, preamble and gap: what the link carries
KMIN, KMAX, PMAX = 100_000, 400_000, 0.2  # config/fabric/leaf-spine.toml's [qos.ecn.3]
FEEDBACK_US = 2.0

# (g, alpha period us, rate timer us, byte counter bytes, fast stages, Rai Mb/s, Rhai Mb/s,
#  CNP interval us, floor Mb/s): core/src/engine/fabric/dcqcn.rs's presets.
PRESETS = {
    "default": (1 / 256, 55.0, 55.0, 256 * 1024, 1, 1000.0, 5000.0, 50.0, 100.0),
    "paper": (1 / 256, 55.0, 55.0, 10 * 1024 * 1024, 5, 40.0, 200.0, 50.0, 100.0),
}


def pkts_per_us(gbps):
    return gbps * 1e3 / (8 * WIRE)


def mark_probability(queue):
    if queue <= KMIN:
        return 0.0
    if queue > KMAX:
        return 1.0
    return (queue - KMIN) / (KMAX - KMIN) * PMAX


def stage_rate(p, packets):
    """Stages per microsecond of a counter that completes after `packets` unmarked packets
    in a row, sent at one packet per microsecond (the model's R_C p / ((1-p)^-B - 1))."""
    if p < 1e-12:
        return 1.0 / packets
    exponent = -packets * math.log1p(-p) if p < 1.0 else math.inf
    return 0.0 if exponent > 700 else p / math.expm1(exponent)


def model(senders, preset, duration_us, dt=0.01):
    g, alpha_us, timer_us, byte_counter, fast, rai, _rhai, tau, floor = PRESETS[preset]
    capacity = pkts_per_us(LINE_GBPS)
    rai, floor = pkts_per_us(rai / 1e3), pkts_per_us(floor / 1e3)
    b_pkts = byte_counter / FRAME
    rc = rt = capacity
    alpha, queue = 1.0, 0.0
    delay = int(FEEDBACK_US / dt)
    history = [(0.0, rc)] * (delay + 1)
    times, queues, carried = [], [], []
    steps = int(duration_us / dt)
    for step in range(steps):
        p, rc_seen = history[step % len(history)]
        cnp = 1.0 - (1.0 - p) ** (tau * rc_seen)
        cnp_alpha = 1.0 - (1.0 - p) ** (alpha_us * rc_seen)
        byte_stages = rc_seen * stage_rate(p, b_pkts)
        timer_stages = rc_seen * stage_rate(p, timer_us * rc_seen)
        # Additive steps only past F fast stages: each counter's chance of F clean stages.
        byte_past = (1.0 - p) ** (fast * b_pkts)
        timer_past = (1.0 - p) ** (fast * timer_us * rc_seen)
        d_alpha = g / alpha_us * (cnp_alpha - alpha)
        d_rt = -(rt - rc) / tau * cnp + rai * (byte_stages * byte_past + timer_stages * timer_past)
        d_rc = -rc * alpha / (2 * tau) * cnp + (rt - rc) / 2 * (byte_stages + timer_stages)
        alpha += d_alpha * dt
        rt = min(capacity, rt + d_rt * dt)
        rc = max(floor, min(capacity, rc + d_rc * dt))
        arriving = senders * rc
        served = capacity if queue > 0 or arriving >= capacity else arriving
        queue = max(0.0, queue + (arriving - capacity) * dt * WIRE)
        history[step % len(history)] = (mark_probability(queue), rc)
        if step % 100 == 0:
            times.append(step * dt)
            queues.append(queue)
            carried.append(served / capacity * LINE_GBPS)
    return times, queues, carried


def measures(times, queues, carried, end_us):
    """Up to `end_us`: when the bottleneck first carries 95% of line rate again after the
    first cuts left it idle (ms; 0 when it never fell below), its mean utilisation (%), and
    the median queue over the second half (KB)."""
    window = [(t, q, gbps) for t, q, gbps in zip(times, queues, carried) if t <= end_us]
    first_low = next((i for i, (_, _, gbps) in enumerate(window) if gbps < 0.95 * LINE_GBPS), None)
    recovered = 0.0
    if first_low is not None:
        back = next((t for t, _, gbps in window[first_low:] if gbps >= 0.95 * LINE_GBPS), end_us)
        recovered = back / 1e3
    utilisation = statistics.mean(gbps for _, _, gbps in window) / LINE_GBPS * 100
    late = [q for t, q, _ in window if t >= end_us / 2]
    return recovered, utilisation, statistics.median(late) / 1e3


def raceway(binary, fabric_file, preset, senders, duration_us):
    """The same incast in `raceway fabric`: one leaf, the senders and the receiver h0."""
    text = open(fabric_file).read()
    for key, value in (("leaves", 1), ("spines", 1), ("hosts_per_leaf", senders + 1)):
        lines = text.splitlines()
        text = "\n".join(f"{key} = {value}" if line.split("=")[0].strip() == key else line for line in lines)
    text += f'\n[dcqcn]\npreset = "{preset}"\n' + os.environ.get("DCQCN_EXTRA", "").replace(";", "\n") + "\n"
    message = int(duration_us * 1e-6 * LINE_GBPS * 1e9 / 8 / senders * PAYLOAD / WIRE) // PAYLOAD * PAYLOAD
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fabric.toml")
        open(path, "w").write(text)
        out = os.path.join(tmp, "out")
        subprocess.run([binary, "fabric", "-c", path, "--workload", "incast", "--target", "0",
                        "--message-bytes", str(message), "--messages", "1", "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        series = json.load(open(os.path.join(out, "leaf0", "series.json")))
        results = json.load(open(os.path.join(out, "results.json")))
    interval = series["interval_ns"] / 1e3
    port = series["ports"]["h0"]
    times = [i * interval for i in range(series["samples"])]
    return times, port["queue_depth_bytes"]["3"], port["tx_gbps"], results


def main():
    binary, fabric_file, preset = sys.argv[1], sys.argv[2], sys.argv[3]
    extra = os.environ.get("DCQCN_EXTRA", "")
    print(f"DCQCN preset {preset}{' (' + extra + ')' if extra else ''}: N senders at 100G into one 100G port, "
          f"kmin/kmax/pmax {KMIN // 1000}/{KMAX // 1000} KB/{PMAX}")
    print("| senders | back to 95% of line rate (ms): model | raceway | utilisation (%): model | raceway "
          "| steady queue (KB): model | raceway | raceway CNPs |")
    print("|---|---|---|---|---|---|---|---|")
    for senders in map(int, sys.argv[4:]):
        duration = 20_000.0
        times, queues, carried, results = raceway(binary, fabric_file, preset, senders, duration)
        # Up to the first message's end (the rest is the tail draining).
        end = min(results["fct_us"]["p50"], times[-1]) * 0.95
        ours = measures(times, queues, carried, end)
        theirs = measures(*model(senders, preset, end), end)
        print(f"| {senders} | {theirs[0]:.2f} | {ours[0]:.2f} | {theirs[1]:.1f} | {ours[1]:.1f} "
              f"| {theirs[2]:.0f} | {ours[2]:.0f} | {results['cnps_sent']} |")


if __name__ == "__main__":
    main()
