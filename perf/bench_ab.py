"""The driver of perf/bench-ab.sh: runs two criterion bench binaries in turn and compares
each benchmark's per-run estimates (minimum and median)."""
import collections, os, re, subprocess, sys, tempfile

import perflib

old, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
home = tempfile.mkdtemp(prefix="raceway-ab-criterion-")
env = dict(os.environ, CRITERION_HOME=home)
unit = {"ps": 1e-6, "ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
runs = {"old": collections.defaultdict(list), "new": collections.defaultdict(list)}
for index in range(rounds):
    order = (("old", old), ("new", new)) if index % 2 == 0 else (("new", new), ("old", old))
    for name, executable in order:
        output = subprocess.run([executable, "--bench", "--warm-up-time", "1", "--measurement-time", "3",
                                 "--noplot"], capture_output=True, text=True, env=env, check=True).stdout
        bench = None
        for line in output.splitlines():
            if line and not line.startswith(" "):
                bench = line.split()[0]
            found = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
            if found and bench:
                runs[name][bench].append(float(found.group(1)) * unit[found.group(2)])
                bench = None
print(f"| benchmark | old min | new min | new/old (min) | old median | new median | new/old (median) |")
print(f"|---|---|---|---|---|---|---|")
for bench, old_runs in runs["old"].items():
    new_runs = runs["new"][bench]
    o, n, om, nm = min(old_runs), min(new_runs), perflib.median(old_runs), perflib.median(new_runs)
    print(f"| {bench} | {o:.2f} us | {n:.2f} us | {n / o:.2f} | {om:.2f} us | {nm:.2f} us | {nm / om:.2f} |")
