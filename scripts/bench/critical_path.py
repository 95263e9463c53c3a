#!/usr/bin/env python3
"""Where a relay's instructions fall around its system calls (scripts/bench.sh instructions).

Reads the callgrind dumps of one process run with a dump before each `recv`, `send` and
`epoll_wait` (`--dump-before=...`), and prints, per kind of stretch between two of them, how
many there were and their median instruction count:
  - wake -> read: from `epoll_wait` to the `recv` it led to (the scheduler, the task's polls);
  - read -> write: from a `recv` to the `send` it caused (what the relay does with the bytes);
  - write -> sleep: from a `send` to the next `epoll_wait` (what it does after the write).
At one client thread every hop waits for the one before it, so the first two are on the
critical path of each query. The third may be too: on the two-core bench machine
`scripts/bench.sh trace` finds a one-thread query's whole chain on one CPU, where the next hop either
pre-empts the writer or waits for it to sleep.

Usage: critical_path.py DUMP_PREFIX   (the files DUMP_PREFIX.1, DUMP_PREFIX.2, ...)
"""

import glob
import re
import statistics
import sys

NAMES = {
    ("epoll_wait", "recv"): "wake -> read",
    ("recv", "send"): "read -> write",
    ("send", "epoll_wait"): "write -> sleep",
}


def dumps(prefix):
    """(part number, trigger, instructions) of each dump, in order."""
    parts = []
    for path in glob.glob(prefix + ".*"):
        number = re.search(r"\.(\d+)$", path)
        if not number:
            continue
        trigger = cost = None
        with open(path, encoding="utf-8", errors="replace") as dump:
            for line in dump:
                if line.startswith("desc: Trigger:"):
                    trigger = line.rsplit("=", 1)[-1].strip().replace("__libc_", "")
                elif line.startswith("summary:"):
                    cost = int(line.split()[1])
                    break
        if trigger and cost is not None:
            parts.append((int(number.group(1)), trigger, cost))
    return sorted(parts)


def main():
    prefix = sys.argv[1]
    parts = dumps(prefix)
    # Leave out the start (connections being opened) and the end (the client hanging up).
    parts = parts[len(parts) // 5 : len(parts) - len(parts) // 10]
    stretches = {}
    for (_, before, _), (_, after, cost) in zip(parts, parts[1:]):
        stretches.setdefault((before, after), []).append(cost)
    medians = {}
    for key, name in NAMES.items():
        costs = stretches.get(key, [])
        medians[key] = statistics.median(costs) if costs else 0
        print(f"    {name:<15} {len(costs):6d} times, median {medians[key]:7.0f} instructions")
    on_path = medians[("epoll_wait", "recv")] + medians[("recv", "send")]
    print(f"    a hop: {on_path:.0f} on the critical path, {medians[('send', 'epoll_wait')]:.0f} after its write")
    other = sum(len(v) for k, v in stretches.items() if k not in NAMES)
    print(f"    (other stretches: {other})")


if __name__ == "__main__":
    main()
