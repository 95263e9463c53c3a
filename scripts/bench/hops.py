#!/usr/bin/env python3
"""Where a query's time goes, hop by hop, from a system-wide perf trace (scripts/bench.sh trace).

Reads `perf script` output of `raw_syscalls:sys_enter`, `raw_syscalls:sys_exit` and
`sched:sched_switch`, recorded while one client thread ran queries through a two-half relay
(the tunnel's sidecar and transport, or wstunnel's client and server), and prints:
  - the wall time of each stretch of a query, median and mean in microseconds: the client's
    write to the client half's read ("client > C"), the client half's read to its write
    ("C in"), and so on to the server and back; with the share of stretches whose two ends
    ran on the same CPU;
  - for each half, its CPU time per query, in user space (everything on the CPU outside a
    system call) and in each system call, with the calls per query.
Syscall numbers are x86_64's. CPU times are per query asked (QUERIES), over the whole trace,
which also holds a second before the queries; stretches are over the queries found whole.
Reads and writes of 8 bytes (a runtime's eventfd wake-ups) are not taken for the query's data.

Usage: hops.py TRACE QUERIES CLIENT_COMMAND SERVER_PID CLIENT_HALF_PID SERVER_HALF_PID
(the client by its command name, e.g. sysbench; the others by process id)
"""

import collections
import re
import statistics
import sys

READS = {0: "read", 45: "recvfrom", 47: "recvmsg"}
WRITES = {1: "write", 20: "writev", 44: "sendto", 46: "sendmsg"}
OTHERS = {7: "poll", 202: "futex", 228: "clock_gettime", 232: "epoll_wait",
          233: "epoll_ctl", 281: "epoll_pwait", 441: "epoll_pwait2"}
NAMES = {**READS, **WRITES, **OTHERS}

# The stretches of one query: who acts, and the label of the stretch that ends there.
CHAIN = [("client", "write", None), ("C", "read", "client > C"), ("C", "write", "C in"),
         ("S", "read", "C > S"), ("S", "write", "S in"), ("db", "read", "S > db"),
         ("db", "write", "db"), ("S", "read", "db > S"), ("S", "write", "S out"),
         ("C", "read", "S > C"), ("C", "write", "C out"), ("client", "read", "C > client")]
LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
SYSCALL = re.compile(r"NR (-?\d+)(?: = (-?\d+))?")
SWITCH = re.compile(r"prev_pid=(\d+) .*next_pid=(\d+)")
ARGUMENTS = re.compile(r"NR -?\d+ \(([0-9a-f, ]*)\)")


class Thread:
    """A thread of a half: its half, whether it is on a CPU, the system call it is in (None
    outside one), and since when that holds."""

    __slots__ = ("role", "running", "call", "since")

    def __init__(self, role, since):
        self.role, self.running, self.call, self.since = role, True, None, since


def events(path):
    """(time, pid, tid, cpu, event, rest) for each line of a `perf script` dump."""
    with open(path, errors="replace") as trace:
        for line in trace:
            match = LINE.match(line)
            if match:
                command, pid, tid, cpu, time, event, rest = match.groups()
                yield float(time), int(pid), int(tid), int(cpu), event, rest, command


def analyse(path, roles, client):
    """The stretches of each query, and each half's CPU time per bucket and its call counts."""
    steps = []  # (time, role, "read"|"write", cpu): the data moving along the chain
    cpu_time = {"C": collections.Counter(), "S": collections.Counter()}
    calls = {"C": collections.Counter(), "S": collections.Counter()}
    threads = {}  # tid of a half: its Thread
    small = {}  # tid -> the read or write it is in moves 8 bytes at most (an eventfd's)

    def account(thread, time):
        if thread.running:
            cpu_time[thread.role][thread.call or "user"] += time - thread.since
        thread.since = time

    for time, pid, tid, cpu, event, rest, command in events(path):
        if event == "sched:sched_switch":
            switch = SWITCH.search(rest)
            if switch is None:
                sys.exit("a sched_switch line this script cannot read: " + rest)
            for other, running in ((int(switch.group(1)), False), (int(switch.group(2)), True)):
                if other in threads:
                    account(threads[other], time)
                    threads[other].running = running
            continue
        role = "client" if command == client else roles.get(pid)
        if role is None:
            continue
        call = SYSCALL.search(rest)
        if call is None:
            continue
        number = int(call.group(1))
        if role in cpu_time:
            thread = threads.setdefault(tid, Thread(role, time))
            account(thread, time)
            # A thread in a system call is on a CPU, whatever the switches lost said.
            thread.running = True
            if event == "raw_syscalls:sys_enter":
                thread.call = NAMES.get(number, str(number))
                calls[role][thread.call] += 1
            else:
                thread.call = None
        if event == "raw_syscalls:sys_enter":
            arguments = ARGUMENTS.search(rest)
            count = arguments.group(1).split(", ")[2] if arguments else "0"
            small[tid] = number in (0, 1) and int(count or "0", 16) <= 8
            if number in WRITES and not small[tid]:
                steps.append((time, role, "write", cpu))
        elif number in READS and int(call.group(2) or 0) > 0 and not small.get(tid):
            steps.append((time, role, "read", cpu))
    return stretches(steps), cpu_time, calls


def stretches(steps):
    """The stretches of each whole query found in order (one that took over 2 ms is left out)."""
    found = collections.defaultdict(list)
    same_cpu = collections.Counter()
    start = 0
    while start < len(steps):
        if steps[start][1:3] != ("client", "write"):
            start += 1
            continue
        seen, at = [steps[start]], start + 1
        while at < len(steps) and len(seen) < len(CHAIN):
            if steps[at][1:3] == CHAIN[len(seen)][:2]:
                seen.append(steps[at])
            elif steps[at][1:3] == ("client", "write"):
                break
            at += 1
        if len(seen) == len(CHAIN) and seen[-1][0] - seen[0][0] < 0.002:
            found["query"].append(seen[-1][0] - seen[0][0])
            for before, after, (_, _, label) in zip(seen, seen[1:], CHAIN[1:]):
                found[label].append(after[0] - before[0])
                same_cpu[label] += before[3] == after[3]
            start = at
        else:
            start += 1
    return found, same_cpu


def main():
    path, queries = sys.argv[1], int(sys.argv[2])
    client = sys.argv[3]
    server, client_half, server_half = map(int, sys.argv[4:7])
    roles = {server: "db", client_half: "C", server_half: "S"}
    (found, same_cpu), cpu_time, calls = analyse(path, roles, client)
    whole = len(found["query"])
    if not whole:
        sys.exit("no whole query in the trace")
    micro = lambda values: (statistics.median(values) * 1e6, statistics.mean(values) * 1e6)
    print("  query: %d traced, median %.1f us, mean %.1f us" % (whole, *micro(found["query"])))
    print("  stretch (median/mean us, same CPU %):")
    print("   " + "  ".join("%s %.1f/%.1f %d%%" % (label, *micro(found[label]), 100 * same_cpu[label] // whole)
                            for _, _, label in CHAIN[1:]))
    summary = ["query %.1f" % micro(found["query"])[1]]
    for role, half in (("C", "client half"), ("S", "server half")):
        spent = cpu_time[role]
        system = sum(v for k, v in spent.items() if k != "user")
        top = [(k, v) for k, v in spent.most_common() if k != "user" and v / queries > 2e-7]
        print("  %s: CPU %.1f us per query, user %.1f, system %.1f (%s)" % (
            half, (spent["user"] + system) / queries * 1e6, spent["user"] / queries * 1e6,
            system / queries * 1e6,
            ", ".join("%s %.1f us x%.2f" % (k, v / queries * 1e6, calls[role][k] / queries) for k, v in top)))
        summary += ["%s user %.2f system %.2f" % (role, spent["user"] / queries * 1e6, system / queries * 1e6)]
    print("  summary: " + ", ".join(summary))


if __name__ == "__main__":
    main()
