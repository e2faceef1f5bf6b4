"""What the perf scripts share in Python: the arithmetic of their tables, reading stats JSON,
and asking a running switch over its DPDK telemetry socket. Imported by the Python scripts
(`import perflib`, from perf/) and run by perf/lib.sh for the shell ones:

    python3 perf/perflib.py ratio A B | median N... | get FILE PATH | less A B | mpps STATS PORT
"""
import json
import math
import socket
import statistics
import sys


def ratio(a, b):
    """A / B to two decimals, or "n/a" when either is n/a or B is zero."""
    if "n/a" in (str(a), str(b)) or float(b) == 0:
        return "n/a"
    return "%.2f" % (float(a) / float(b))


def median(values):
    """The middle value (the mean of the two middle ones of an even count)."""
    return statistics.median(float(value) for value in values)


def percentile(ordered, q):
    """The value at rank ceil(q x n) of sorted values (1-based, clamped), as the fabric's
    results take percentiles."""
    rank = min(max(math.ceil(q * len(ordered)), 1), len(ordered))
    return ordered[rank - 1]


def get(document, path):
    """The value at a dotted path (`ports.out.tx_packets`) of a JSON document."""
    for key in path.split("."):
        document = document[int(key)] if isinstance(document, list) else document[key]
    return document


def load(path):
    with open(path) as file:
        return json.load(file)


def mpps(stats, port):
    """A port's forwarded millions of frames per second over a stats JSON's run."""
    return stats["ports"][port]["tx_packets"] / stats["elapsed_s"] / 1e6


def telemetry(path, command):
    """One DPDK telemetry command's reply, from the socket at `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as connection:
        connection.connect(path)
        hello = json.loads(connection.recv(1024))  # the greeting: version and output limit
        connection.send(command.encode())
        return json.loads(connection.recv(hello.get("max_output_len", 16384)))


def main(words):
    verb, arguments = words[0], words[1:]
    if verb == "ratio":
        print(ratio(*arguments))
    elif verb == "median":
        print("n/a" if "n/a" in arguments else "%.2f" % median(arguments))
    elif verb == "least":
        print("n/a" if "n/a" in arguments else "%.1f" % min(float(value) for value in arguments))
    elif verb == "get":
        print(get(load(arguments[0]), arguments[1]))
    elif verb == "less":
        sys.exit(0 if float(arguments[0]) < float(arguments[1]) else 1)
    elif verb == "mpps":
        print("%.2f" % mpps(load(arguments[0]), arguments[1]))
    else:
        sys.exit("perflib: unknown verb %s" % verb)


if __name__ == "__main__":
    main(sys.argv[1:])
