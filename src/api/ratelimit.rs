//! The client-side rate limiter: never more than N requests (600 by default) in any sliding
//! window (60 s), shared by every task of the process.
//!
//! It is a sliding-window log: the send instants of the last window are kept, and a request is
//! let through only while fewer than N of them are younger than the window. So any N + 1
//! consecutive sends span at least one window, which is exactly "at most N in any window"
//! (a GCRA quota of 600/min with a burst of 600 would let ~1,199 through in one window).
//!
//! Waiters queue first come, first served (tokio's fair mutex). Low-priority callers (the
//! status page refresh) take capacity only while more than a reserve is left, and never hold
//! the queue, so normal callers always go first. Routes with their own limit get their own log
//! and are not counted in the default one.
//!
//! `RateLimiter::shared` is a process-wide static, on purpose: the service counts requests per
//! key, so every client of the process (sync, the status endpoint's remote view, `pause`, the
//! check update after `run`'s ping) must draw on one window, and `/metrics` reports that
//! window's waits. It is what [`super::ApiClientConfig::new`] gives by default; a client that
//! must not share it is given its own (`ApiClientConfig::rate_limiter`, as the demo's table).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use super::Operation;

/// N requests per window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Most requests in any window (at least 1).
    pub requests: u32,
    /// The window's length.
    pub window: Duration,
}

impl Quota {
    /// The service's limit on most routes: 600 requests per 60 seconds.
    pub const DEFAULT: Quota = Quota {
        requests: 600,
        window: Duration::from_secs(60),
    };
}

/// Who is asking: normal work, or something that can wait for spare capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Checks sync, CLI calls: served in arrival order.
    #[default]
    Normal,
    /// Background refreshes: served only while more than the reserve is free, after every
    /// normal caller.
    Low,
}

/// Counters of the limiter, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimitStats {
    /// Requests let through.
    pub acquired: u64,
    /// Of those, how many had to wait.
    pub waited: u64,
    /// Total time spent waiting.
    pub wait_time: Duration,
}

struct Window {
    quota: Quota,
    /// How many slots low-priority callers leave free.
    low_reserve: usize,
    sends: Mutex<VecDeque<Instant>>,
}

impl Window {
    fn new(quota: Quota, low_reserve: u32) -> Self {
        let requests = quota.requests.max(1);
        Window {
            quota: Quota { requests, ..quota },
            low_reserve: low_reserve.min(requests - 1) as usize,
            sends: Mutex::new(VecDeque::with_capacity(requests as usize)),
        }
    }

    fn forget_old(&self, sends: &mut VecDeque<Instant>, now: Instant) {
        while sends
            .front()
            .is_some_and(|first| *first + self.quota.window <= now)
        {
            sends.pop_front();
        }
    }

    async fn acquire_normal(&self) {
        // Holding the lock while sleeping keeps later callers queued behind this one.
        let mut sends = self.sends.lock().await;
        loop {
            let now = Instant::now();
            self.forget_old(&mut sends, now);
            match sends.front() {
                Some(first) if sends.len() >= self.quota.requests as usize => {
                    let free_at = *first + self.quota.window;
                    tokio::time::sleep_until(free_at).await;
                }
                _ => {
                    sends.push_back(now);
                    return;
                }
            }
        }
    }

    async fn acquire_low(&self) {
        let allowed = self.quota.requests as usize - self.low_reserve;
        loop {
            let free_at = {
                let mut sends = self.sends.lock().await;
                let now = Instant::now();
                self.forget_old(&mut sends, now);
                if sends.len() < allowed {
                    sends.push_back(now);
                    return;
                }
                // Below `allowed` once the oldest `len - allowed + 1` sends have aged out.
                sends[sends.len() - allowed] + self.quota.window
            };
            tokio::time::sleep_until(free_at).await;
        }
    }
}

/// The process's rate limiter. Share one `Arc<RateLimiter>` among all clients
/// ([`RateLimiter::shared`] is the process-wide one).
pub struct RateLimiter {
    default: Window,
    routes: HashMap<Operation, Window>,
    acquired: AtomicU64,
    waited: AtomicU64,
    wait_nanos: AtomicU64,
}

impl RateLimiter {
    /// A limiter with `quota` for every route; low-priority callers leave a tenth free.
    pub fn new(quota: Quota) -> Self {
        let low_reserve = quota.requests / 10;
        RateLimiter {
            default: Window::new(quota, low_reserve),
            routes: HashMap::new(),
            acquired: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
        }
    }

    /// Gives `operation` its own limit (a route with a custom rate limit). Its requests are
    /// counted in its own window only.
    #[cfg(test)]
    pub(crate) fn with_route(mut self, operation: Operation, quota: Quota) -> Self {
        let reserve = quota.requests / 10;
        self.routes.insert(operation, Window::new(quota, reserve));
        self
    }

    /// Sets how many slots of the default window low-priority callers leave free.
    #[cfg(test)]
    pub(crate) fn with_low_priority_reserve(mut self, reserve: u32) -> Self {
        self.default = Window::new(self.default.quota, reserve);
        self
    }

    /// The process-wide limiter with the service's default quota, created on first use.
    pub(crate) fn shared() -> Arc<RateLimiter> {
        // One per process: the service's quota is per API key, shared by every client here.
        static SHARED: OnceLock<Arc<RateLimiter>> = OnceLock::new();
        SHARED
            .get_or_init(|| Arc::new(RateLimiter::new(Quota::DEFAULT)))
            .clone()
    }

    /// The quota that applies to `operation`.
    #[cfg(test)]
    pub(crate) fn quota(&self, operation: Operation) -> Quota {
        self.window(operation).quota
    }

    fn window(&self, operation: Operation) -> &Window {
        self.routes.get(&operation).unwrap_or(&self.default)
    }

    /// Waits until a request of `operation` may be sent now, and counts it as sent.
    pub(crate) async fn acquire(&self, operation: Operation, priority: Priority) {
        let started = Instant::now();
        let window = self.window(operation);
        match priority {
            Priority::Normal => window.acquire_normal().await,
            Priority::Low => window.acquire_low().await,
        }
        let waited = started.elapsed();
        self.acquired.fetch_add(1, Ordering::Relaxed);
        if !waited.is_zero() {
            self.waited.fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
            self.wait_nanos.fetch_add(nanos, Ordering::Relaxed);
            tracing::debug!(
                operation = %operation,
                waited_ms = waited.as_millis() as u64,
                "rate limiter delayed a request"
            );
        }
    }

    /// Counters since the limiter was made.
    #[doc(alias = "metrics")]
    pub fn stats(&self) -> RateLimitStats {
        RateLimitStats {
            acquired: self.acquired.load(Ordering::Relaxed),
            waited: self.waited.load(Ordering::Relaxed),
            wait_time: Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed)),
        }
    }
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: Vec<(Operation, Quota)> =
            self.routes.iter().map(|(op, w)| (*op, w.quota)).collect();
        f.debug_struct("RateLimiter")
            .field("default", &self.default.quota)
            .field("low_reserve", &self.default.low_reserve)
            .field("routes", &routes)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Acquires `total` slots from `tasks` concurrent tasks and returns the sorted instants.
    async fn acquire_many(limiter: Arc<RateLimiter>, tasks: usize, total: usize) -> Vec<Instant> {
        let instants = Arc::new(std::sync::Mutex::new(Vec::with_capacity(total)));
        let mut set = tokio::task::JoinSet::new();
        for task in 0..tasks {
            let (limiter, instants) = (limiter.clone(), instants.clone());
            let share = total / tasks + usize::from(task < total % tasks);
            set.spawn(async move {
                for _ in 0..share {
                    limiter
                        .acquire(Operation::ListCheckStatuses, Priority::Normal)
                        .await;
                    instants.lock().unwrap().push(Instant::now());
                }
            });
        }
        while let Some(done) = set.join_next().await {
            done.unwrap();
        }
        let mut instants = std::mem::take(&mut *instants.lock().unwrap());
        instants.sort();
        instants
    }

    /// True when no window of `window` holds more than `n` of the sorted `instants`.
    fn holds(instants: &[Instant], n: usize, window: Duration) -> bool {
        instants
            .windows(n + 1)
            .all(|run| run[n].duration_since(run[0]) >= window)
    }

    #[tokio::test(start_paused = true)]
    async fn never_more_than_600_in_any_60s_window_with_full_throughput() {
        let limiter = Arc::new(RateLimiter::new(Quota::DEFAULT));
        let start = Instant::now();
        let instants = acquire_many(limiter.clone(), 25, 10_000).await;
        assert_eq!(instants.len(), 10_000);
        assert!(holds(&instants, 600, Duration::from_secs(60)));
        // 10,000 sends need 17 windows' worth of slots: the last batch goes at 16 * 60 s.
        let span = instants[instants.len() - 1].duration_since(start);
        assert!(span >= Duration::from_secs(960), "{span:?}");
        assert!(
            span <= Duration::from_secs(961),
            "throughput too low: {span:?}"
        );
        let stats = limiter.stats();
        assert_eq!(stats.acquired, 10_000);
        // Every window after the first starts with callers that waited for it.
        assert!(
            stats.waited >= 16 && stats.waited <= 10_000 - 600,
            "{stats:?}"
        );
        assert!(stats.wait_time >= Duration::from_secs(16 * 60), "{stats:?}");
        // A GCRA-style limiter (burst 600 + 600/min) fails the same check.
        let mut gcra: Vec<Instant> = (0..600).map(|_| start).collect();
        gcra.extend((1..=600).map(|i| start + Duration::from_millis(100 * i)));
        assert!(!holds(&gcra, 600, Duration::from_secs(60)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_route_with_its_own_quota_is_limited_separately() {
        let custom = Quota {
            requests: 5,
            window: Duration::from_secs(10),
        };
        let limiter = Arc::new(
            RateLimiter::new(Quota::DEFAULT).with_route(Operation::ListCheckStatuses, custom),
        );
        assert_eq!(limiter.quota(Operation::ListCheckStatuses), custom);
        let instants = acquire_many(limiter.clone(), 3, 23).await;
        assert!(holds(&instants, 5, Duration::from_secs(10)));
        assert!(!holds(&instants, 4, Duration::from_secs(10)));
        // The default route is untouched.
        let before = Instant::now();
        limiter
            .acquire(Operation::GetCheckGroup, Priority::Normal)
            .await;
        assert_eq!(Instant::now(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_waits_for_spare_capacity_and_behind_normal_callers() {
        let quota = Quota {
            requests: 10,
            window: Duration::from_secs(60),
        };
        let limiter = Arc::new(RateLimiter::new(quota).with_low_priority_reserve(3));
        let start = Instant::now();
        for _ in 0..7 {
            limiter
                .acquire(Operation::GetCheckGroup, Priority::Normal)
                .await;
        }
        // 7 of 10 used, reserve 3: a low caller must wait for the first sends to age out...
        let low = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                limiter
                    .acquire(Operation::GetCheckGroup, Priority::Low)
                    .await;
                Instant::now()
            }
        });
        tokio::task::yield_now().await;
        // ...while normal callers still get the last 3 slots at once.
        for _ in 0..3 {
            limiter
                .acquire(Operation::GetCheckGroup, Priority::Normal)
                .await;
        }
        assert_eq!(Instant::now(), start);
        let low_at = low.await.unwrap();
        assert!(
            low_at >= start + Duration::from_secs(60),
            "{:?}",
            low_at - start
        );
    }
}
