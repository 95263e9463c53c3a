//! Maps `Instant`s to wheel ticks: deadlines round up, "now" rounds down, so a timer never
//! fires before its `Instant` and at most one tick after it.

use std::time::{Duration, Instant};

/// Tick arithmetic from an origin and a tick length.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
    tick_nanos: u128,
}

impl Clock {
    /// Ticks of `tick` (at least 1 ns) counted from `origin`.
    pub fn new(origin: Instant, tick: Duration) -> Self {
        Self { origin, tick_nanos: tick.as_nanos().max(1) }
    }

    /// The first tick at or after `t` (use for deadlines).
    pub fn deadline_tick(&self, t: Instant) -> u64 {
        let nanos = t.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(nanos.div_ceil(self.tick_nanos)).unwrap_or(u64::MAX)
    }

    /// The last tick at or before `t` (use for "now").
    pub fn now_tick(&self, t: Instant) -> u64 {
        let nanos = t.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(nanos / self.tick_nanos).unwrap_or(u64::MAX)
    }

    /// The instant a tick begins.
    pub fn instant(&self, tick: u64) -> Instant {
        let nanos = u128::from(tick) * self.tick_nanos;
        self.origin + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_now_rounds_down() {
        let origin = Instant::now();
        let c = Clock::new(origin, Duration::from_millis(10));
        let t = origin + Duration::from_millis(25);
        assert_eq!(c.deadline_tick(t), 3);
        assert_eq!(c.now_tick(t), 2);
        assert_eq!(c.deadline_tick(origin + Duration::from_millis(30)), 3);
        assert_eq!(c.instant(3), origin + Duration::from_millis(30));
        assert_eq!(c.now_tick(origin), 0);
    }
}
