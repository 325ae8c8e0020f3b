//! The pipeline with a scripted [`Runner`]: the attempt loop, the choice of the final ping,
//! and the order of what a runner is told. Time is paused: the waits between attempts pass
//! at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;

use super::*;
use crate::config::FailUrl;
use crate::ping::outbox::PingContext;
use crate::ping::{Budget, PingMethod};
use crate::run_end::ProcessEnd;

/// A runner whose attempts exit with the scripted codes, in order; it records what it is told.
struct Scripted {
    codes: Vec<i32>,
    /// A stop is asked after this many attempts.
    stop_after: Option<u32>,
    attempts: u32,
    told: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    fn new(codes: &[i32]) -> Scripted {
        Scripted {
            codes: codes.to_vec(),
            stop_after: None,
            attempts: 0,
            told: Arc::default(),
        }
    }

    fn told(&self) -> Vec<String> {
        self.told.lock().expect("lock").clone()
    }

    fn tell(&self, what: String) {
        self.told.lock().expect("lock").push(what);
    }
}

impl Runner for Scripted {
    async fn attempt(&mut self, attempt: RunAttempt) -> AttemptEnd {
        self.attempts += 1;
        let code = self.codes[usize::try_from(attempt.number - 1).expect("small")];
        let end = RunEnd::Ended(ProcessEnd::Exited(code));
        AttemptEnd {
            started: Utc::now(),
            outcome: end.outcome(&[0]),
            end,
            output_tail: format!("output of attempt {}\n", attempt.number).into_bytes(),
        }
    }

    fn stop_asked(&self) -> bool {
        self.stop_after.is_some_and(|n| self.attempts >= n)
    }

    async fn stopped(&mut self) {
        if !self.stop_asked() {
            std::future::pending::<()>().await;
        }
    }

    fn notice(&self, notice: Notice<'_>) {
        let said = match notice {
            Notice::Retrying { attempt, .. } => format!("retrying after {}", attempt.number),
            Notice::NoFurtherAttempt { attempt, .. } => {
                format!("no further after {}", attempt.number)
            }
            Notice::AllFailed { attempt, .. } => format!("all {} failed", attempt.of),
            Notice::SucceededAfter { attempt } => format!("succeeded on {}", attempt.number),
            Notice::PingInterrupted { fail } => format!("interrupted fail={fail}"),
        };
        self.tell(said);
    }

    fn success_ping(&self) -> Option<Ping> {
        None
    }

    fn ended(&mut self, record: &Arc<RunRecord>, _pinging: bool) {
        self.tell(format!(
            "ended {} on {}",
            record.outcome.as_str(),
            record.attempts
        ));
    }

    async fn after_ping(&mut self, report: &Report) {
        self.tell(format!("after ping accepted={}", report.ping_accepted));
    }
}

fn pings(fail: Option<&str>, fail_body: Option<usize>) -> Pings {
    Pings {
        start: None,
        fail: fail.map(|u| FailUrl::parse(u).expect("fail url")),
        fail_body,
        fail_send: crate::job::FailSend::default(),
        method: PingMethod::Get,
        source: "test-host".into(),
        budget: Budget {
            total: Duration::from_millis(200),
            ..Budget::default()
        },
        sender: crate::ping::Sender::new(crate::net::Net::default()),
        context: PingContext {
            job: Some("j".into()),
            max_age: Duration::from_secs(3600),
        },
        job_span: false,
    }
}

fn retries(n: u32) -> Retries {
    Retries::new(n, Some(Duration::from_secs(10)), None)
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_is_retried_until_one_succeeds_and_the_runner_hears_each_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outbox = Outbox::new(dir.path(), 100, &crate::persist::Failures::default());
    let mut runner = Scripted::new(&[1, 2, 0, 9]);
    let report = run_with_pings(&mut runner, &retries(3), &pings(None, None), &outbox).await;
    assert!(report.ended.success());
    assert_eq!(runner.attempts, 3);
    assert_eq!(
        runner.told(),
        [
            "retrying after 1",
            "retrying after 2",
            "succeeded on 3",
            "ended success on 3",
            "after ping accepted=false",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_last_failed_attempt_decides_and_a_stop_starts_no_further_attempt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outbox = Outbox::new(dir.path(), 100, &crate::persist::Failures::default());
    let mut all_fail = Scripted::new(&[1, 2, 3]);
    let report = run_with_pings(&mut all_fail, &retries(2), &pings(None, None), &outbox).await;
    assert_eq!(report.ended.end.exit_status(), 3);
    assert_eq!(all_fail.told()[2], "all 3 failed");

    let mut stopped = Scripted::new(&[1, 2, 3]);
    stopped.stop_after = Some(1);
    let report = run_with_pings(&mut stopped, &retries(2), &pings(None, None), &outbox).await;
    assert_eq!(stopped.attempts, 1);
    assert_eq!(report.ended.end.exit_status(), 1);
    assert_eq!(stopped.told()[0], "no further after 1");
}

#[test]
fn a_failure_chooses_the_fail_ping_with_its_status_and_bounded_output() {
    let end = RunEnd::Ended(ProcessEnd::Exited(4));
    let ended = AttemptEnd {
        started: Utc::now(),
        outcome: end.outcome(&[0]),
        end,
        output_tail: b"first line\nlast line\n".to_vec(),
    };
    let with_body = pings(
        Some("http://127.0.0.1:9/fail-token-0001/{exit_code}"),
        Some(10),
    );
    let ping = pings::finish(&with_body, &ended, None, RunId::new()).expect("a fail ping");
    assert_eq!(ping.url(), "http://127.0.0.1:9/fail-token-0001/4");
    assert_eq!(ping.body(), Some("last line\n"));
    assert!(pings::finish(&pings(None, None), &ended, None, RunId::new()).is_none());

    let end = RunEnd::Ended(ProcessEnd::Exited(0));
    let success = AttemptEnd {
        outcome: end.outcome(&[0]),
        end,
        ..ended
    };
    let ok = Ping::new("http://127.0.0.1:9/ok-token-0001", PingMethod::Get, "h").expect("ping");
    let chosen =
        pings::finish(&with_body, &success, Some(ok.clone()), RunId::new()).expect("the success");
    assert_eq!(chosen.url(), ok.url());
}
