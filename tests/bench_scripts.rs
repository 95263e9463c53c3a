//! The benchmark scripts' analysers compute what they say: `scripts/hops.py` on a made-up perf
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

/// Enters system call `nr` with a third argument (a length) of `len`.
fn enter(trace: &mut String, pid: u32, micros: f64, nr: u32, len: u32) {
    line(
        trace,
        pid,
        micros,
        "raw_syscalls:sys_enter",
        &format!("NR {nr} (5, 7f00, {len:x}, 0, 0, 0)"),
    );
}

/// Leaves system call `nr` with `ret`.
fn exit(trace: &mut String, pid: u32, micros: f64, nr: u32, ret: i64) {
    line(trace, pid, micros, "raw_syscalls:sys_exit", &format!("NR {nr} = {ret}"));
}

fn switch(trace: &mut String, micros: f64, prev: u32, next: u32) {
    let rest = format!(
        "prev_comm=x prev_pid={prev} prev_prio=120 prev_state=S ==> next_comm=y next_pid={next} next_prio=120"
    );
    line(trace, 0, micros, "sched:sched_switch", &rest);
}

/// One query: the client writes at 0 µs and reads its answer at 70; each half reads, works,
/// writes, and sleeps in `epoll_wait` between its two hops. An 8-byte eventfd write in the
/// client half is not the query's data.
fn one_query() -> String {
    const READ: u32 = 0;
    const WRITE: u32 = 1;
    const SENDTO: u32 = 44;
    const RECVFROM: u32 = 45;
    const EPOLL_WAIT: u32 = 232;
    let mut t = String::new();
    enter(&mut t, CLIENT, 0.0, SENDTO, 20);
    // The client half: in 10, out 11, asleep 15 to 58, in 60, out 64.
    exit(&mut t, CLIENT_HALF, 10.0, RECVFROM, 20);
    enter(&mut t, CLIENT_HALF, 10.5, WRITE, 8);
    exit(&mut t, CLIENT_HALF, 10.6, WRITE, 8);
    enter(&mut t, CLIENT_HALF, 11.0, SENDTO, 40);
    exit(&mut t, CLIENT_HALF, 13.0, SENDTO, 40);
    enter(&mut t, CLIENT_HALF, 14.0, EPOLL_WAIT, 0);
    switch(&mut t, 15.0, CLIENT_HALF, 0);
    // The server half: in 20, out 22, asleep from 26; in 50, out 53. The switch that put it
    // back on the CPU was lost: its system calls say it ran from 49.
    exit(&mut t, SERVER_HALF, 20.0, RECVFROM, 40);
    enter(&mut t, SERVER_HALF, 22.0, SENDTO, 20);
    exit(&mut t, SERVER_HALF, 24.0, SENDTO, 20);
    enter(&mut t, SERVER_HALF, 25.0, EPOLL_WAIT, 0);
    switch(&mut t, 26.0, SERVER_HALF, 0);
    enter(&mut t, DB, 28.0, READ, 4096);
    exit(&mut t, DB, 30.0, READ, 20);
    enter(&mut t, DB, 40.0, WRITE, 30);
    exit(&mut t, SERVER_HALF, 49.0, EPOLL_WAIT, 1);
    enter(&mut t, SERVER_HALF, 49.5, RECVFROM, 4096);
    exit(&mut t, SERVER_HALF, 50.0, RECVFROM, 30);
    enter(&mut t, SERVER_HALF, 53.0, SENDTO, 50);
    switch(&mut t, 58.0, 0, CLIENT_HALF);
    exit(&mut t, CLIENT_HALF, 59.0, EPOLL_WAIT, 1);
    enter(&mut t, CLIENT_HALF, 59.5, RECVFROM, 4096);
    exit(&mut t, CLIENT_HALF, 60.0, RECVFROM, 50);
    enter(&mut t, CLIENT_HALF, 64.0, SENDTO, 30);
    exit(&mut t, CLIENT_HALF, 66.0, SENDTO, 30);
    exit(&mut t, CLIENT, 70.0, RECVFROM, 30);
    t
}

#[test]
fn hops_py_gives_each_stretch_and_each_half_s_cpu() {
    let trace = std::env::temp_dir().join(format!("sqltunnel-hops-{}.txt", std::process::id()));
    std::fs::write(&trace, one_query()).expect("write the trace");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/hops.py");
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
