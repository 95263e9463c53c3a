//! The benchmark scripts' analysers compute what they say: `scripts/bench/hops.py` on a made-up perf
//! trace of one query whose stretches and CPU times are known.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Process ids of the made-up trace: the client (by its command, `sysbench`), MariaDB, the
/// client half and the server half.
const CLIENT: u32 = 10;
const DB: u32 = 100;
const CLIENT_HALF: u32 = 200;
const SERVER_HALF: u32 = 300;

/// One line of `perf script -F comm,pid,tid,cpu,time,event,trace`, at `micros` µs.
fn line(trace: &mut String, pid: u32, micros: f64, event: &str, rest: &str) {
    let comm = match pid {
        CLIENT => "sysbench",
        DB => "mariadbd",
        CLIENT_HALF => "sidecar",
        SERVER_HALF => "transport",
        _ => "swapper/0",
    };
    let time = 1000.0 + micros / 1e6;
    let event = format!("{event}:");
    writeln!(trace, "{comm:>16} {pid:>6}/{pid:<6} [000] {time:.9}: {event:>26} {rest}")
        .expect("a String takes any write");
}

/// What a line of the made-up trace says.
enum Event {
    /// Enters system call `nr` with a third argument (a length) of `len`.
    Enter(u32, u32),
    /// Leaves system call `nr` with its result.
    Exit(u32, i64),
    /// The CPU goes from thread `prev` to thread `next` (0: idle).
    Switch(u32, u32),
}

const READ: u32 = 0;
const WRITE: u32 = 1;
const SENDTO: u32 = 44;
const RECVFROM: u32 = 45;
const EPOLL_WAIT: u32 = 232;

/// One query, as (process, µs, event): the client writes at 0 µs and reads its answer at 70;
/// each half reads, works, writes, and sleeps in `epoll_wait` between its two hops.
const ONE_QUERY: &[(u32, f64, Event)] = &[
    (CLIENT, 0.0, Event::Enter(SENDTO, 20)),
    // The client half: in 10, out 11, asleep 15 to 58, in 60, out 64. Its 8-byte eventfd
    // write at 10.5 is not the query's data.
    (CLIENT_HALF, 10.0, Event::Exit(RECVFROM, 20)),
    (CLIENT_HALF, 10.5, Event::Enter(WRITE, 8)),
    (CLIENT_HALF, 10.6, Event::Exit(WRITE, 8)),
    (CLIENT_HALF, 11.0, Event::Enter(SENDTO, 40)),
    (CLIENT_HALF, 13.0, Event::Exit(SENDTO, 40)),
    (CLIENT_HALF, 14.0, Event::Enter(EPOLL_WAIT, 0)),
    (0, 15.0, Event::Switch(CLIENT_HALF, 0)),
    // The server half: in 20, out 22, asleep from 26; in 50, out 53. The switch that put it
    // back on the CPU was lost: its system calls say it ran from 49.
    (SERVER_HALF, 20.0, Event::Exit(RECVFROM, 40)),
    (SERVER_HALF, 22.0, Event::Enter(SENDTO, 20)),
    (SERVER_HALF, 24.0, Event::Exit(SENDTO, 20)),
    (SERVER_HALF, 25.0, Event::Enter(EPOLL_WAIT, 0)),
    (0, 26.0, Event::Switch(SERVER_HALF, 0)),
    (DB, 28.0, Event::Enter(READ, 4096)),
    (DB, 30.0, Event::Exit(READ, 20)),
    (DB, 40.0, Event::Enter(WRITE, 30)),
    (SERVER_HALF, 49.0, Event::Exit(EPOLL_WAIT, 1)),
    (SERVER_HALF, 49.5, Event::Enter(RECVFROM, 4096)),
    (SERVER_HALF, 50.0, Event::Exit(RECVFROM, 30)),
    (SERVER_HALF, 53.0, Event::Enter(SENDTO, 50)),
    (0, 58.0, Event::Switch(0, CLIENT_HALF)),
    (CLIENT_HALF, 59.0, Event::Exit(EPOLL_WAIT, 1)),
    (CLIENT_HALF, 59.5, Event::Enter(RECVFROM, 4096)),
    (CLIENT_HALF, 60.0, Event::Exit(RECVFROM, 50)),
    (CLIENT_HALF, 64.0, Event::Enter(SENDTO, 30)),
    (CLIENT_HALF, 66.0, Event::Exit(SENDTO, 30)),
    (CLIENT, 70.0, Event::Exit(RECVFROM, 30)),
];

/// [`ONE_QUERY`] as `perf script` prints it.
fn one_query() -> String {
    let mut trace = String::new();
    for (pid, micros, event) in ONE_QUERY {
        let (name, rest) = match event {
            Event::Enter(nr, len) => {
                ("raw_syscalls:sys_enter", format!("NR {nr} (5, 7f00, {len:x}, 0, 0, 0)"))
            }
            Event::Exit(nr, ret) => ("raw_syscalls:sys_exit", format!("NR {nr} = {ret}")),
            Event::Switch(prev, next) => (
                "sched:sched_switch",
                format!(
                    "prev_comm=x prev_pid={prev} prev_prio=120 prev_state=S ==> next_comm=y next_pid={next} next_prio=120"
                ),
            ),
        };
        line(&mut trace, *pid, *micros, name, &rest);
    }
    trace
}

#[test]
fn hops_py_gives_each_stretch_and_each_half_s_cpu() {
    let trace = std::env::temp_dir().join(format!("sqltunnel-hops-{}.txt", std::process::id()));
    std::fs::write(&trace, one_query()).expect("write the trace");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench/hops.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&trace)
        .arg("1")
        .arg("sysbench")
        .args([DB, CLIENT_HALF, SERVER_HALF].map(|pid| pid.to_string()))
        .output()
        .expect("python3 runs");
    drop(std::fs::remove_file(&trace));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("query: 1 traced, median 70.0 us"), "{text}");
    for stretch in [
        "client > C 10.0/10.0 100%",
        "C in 1.0/1.0",
        "C > S 9.0/9.0",
        "S in 2.0/2.0",
        "S > db 8.0/8.0",
        "db 10.0/10.0",
        "db > S 10.0/10.0",
        "S out 3.0/3.0",
        "S > C 7.0/7.0",
        "C out 4.0/4.0",
        "C > client 6.0/6.0",
    ] {
        assert!(text.contains(stretch), "{stretch:?} in {text}");
    }
    // The client half: user 0.5 + 0.4 + 1 + 0.5 + 4 = 6.4 µs; system: write 0.1, sendto 2 + 2,
    // epoll_wait 1 + 1, recvfrom 0.5 = 6.6 µs; off the CPU from 15 to 58, which counts for
    // neither.
    assert!(text.contains("C user 6.40 system 6.60"), "{text}");
    // The server half, from its first event (a read's end): user 2 + 1 + 0.5 + 3 = 6.5 µs,
    // system: sendto 2, epoll_wait 1, recvfrom 0.5 = 3.5 µs.
    assert!(text.contains("S user 6.50 system 3.50"), "{text}");
    assert!(text.contains("epoll_wait 2.0 us x1.00"), "{text}");
}
