//! What `/proc/self` says of the transport's process (CPU time, resident memory, open
//! descriptors, start time), registered with the other metrics and read when they are
//! rendered.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// What `/proc/self` says of the process, read when rendered.
#[derive(Debug, Default)]
pub struct ProcessMetrics {
    cpu: Counter<f64, std::sync::atomic::AtomicU64>,
    cpu_seen: Mutex<f64>,
    resident: Gauge,
    open_fds: Gauge,
}

impl ProcessMetrics {
    /// Reads CPU time, resident memory and open descriptors (Linux; elsewhere they stay 0).
    pub fn read(&self) {
        // utime and stime are fields 14 and 15, after the parenthesised command name.
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat")
            && let Some((_, rest)) = stat.rsplit_once(')')
        {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks: f64 = fields
                .get(11..13)
                .map_or(0.0, |f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum());
            // USER_HZ is 100 on every Linux this runs on.
            let seconds = ticks / 100.0;
            let mut seen = self.cpu_seen.lock().unwrap_or_else(|p| p.into_inner());
            if seconds > *seen {
                self.cpu.inc_by(seconds - *seen);
                *seen = seconds;
            }
        }
        if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
            let pages: i64 =
                statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            self.resident.set(pages * 4096);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(i64::try_from(fds.count()).unwrap_or(0));
        }
    }

    /// Registers the process's metrics in `registry` (with no prefix, as Prometheus names
    /// them).
    pub fn register(&self, registry: &mut Registry) {
        registry.register_with_unit(
            "process_cpu",
            "CPU time the process has used",
            Unit::Seconds,
            self.cpu.clone(),
        );
        registry.register_with_unit(
            "process_resident_memory",
            "Resident memory of the process",
            Unit::Bytes,
            self.resident.clone(),
        );
        registry.register("process_open_fds", "Open file descriptors", self.open_fds.clone());
        let started: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
        started.set(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64());
        registry.register_with_unit(
            "process_start_time",
            "When the process started, since the Unix epoch",
            Unit::Seconds,
            started,
        );
    }
}
