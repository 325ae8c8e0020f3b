//! The one attempt loop of a run: the command or probe runs once, and again after a failure
//! while the run's [`Retries`] allow, waiting [`Retries::delay_before`] between attempts. A
//! stop asked during an attempt (which then ends as its runner decides) or during a wait ends
//! the run with the last attempt's result: no further attempt starts. Only the last attempt
//! decides the run's outcome; its start is the first attempt's.

use super::{AttemptEnd, Notice, RunAttempt, RunId, Runner};
use crate::retries::Retries;

/// Runs the attempts of run `run`; returns how the last one ended and which it was.
pub(super) async fn run<R: Runner>(
    runner: &mut R,
    retries: &Retries,
    run: RunId,
) -> (AttemptEnd, RunAttempt) {
    let mut attempt = RunAttempt {
        number: 1,
        of: retries.attempts(),
        run,
    };
    let mut first_started = None;
    loop {
        let mut ended = runner.attempt(attempt).await;
        ended.started = *first_started.get_or_insert(ended.started);
        if ended.success() {
            if attempt.number > 1 {
                runner.notice(Notice::SucceededAfter { attempt });
            }
            return (ended, attempt);
        }
        if attempt.of == 1 || ended.end.stopped() {
            return (ended, attempt);
        }
        if attempt.number >= attempt.of {
            runner.notice(Notice::AllFailed {
                attempt,
                ended: &ended,
            });
            return (ended, attempt);
        }
        if runner.stop_asked() {
            runner.notice(Notice::NoFurtherAttempt {
                attempt,
                ended: &ended,
            });
            return (ended, attempt);
        }
        let wait = retries.delay_before(attempt.number - 1);
        runner.notice(Notice::Retrying {
            attempt,
            ended: &ended,
            wait,
        });
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = runner.stopped() => {
                runner.notice(Notice::NoFurtherAttempt { attempt, ended: &ended });
                return (ended, attempt);
            }
        }
        attempt.number += 1;
    }
}
