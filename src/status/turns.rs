//! Turns: how many answers that hold runs' output are in memory at once, from the moment one
//! is read from the history until its last byte was handed to the connection.
//!
//! Two pools of [`TURNS`] turns each, held by one [`Turns`] value that the endpoint makes when
//! it is assembled (its routes share it): the pages and the history's JSON answers
//! ([`Turns::history_turn`], [`Turns::history_alone`]: the dashboard, `/jobs/{name}/runs`, one
//! run), and `/status` ([`Turns::status_turn`]: its document holds every job's last output
//! tail). An answer is
//! made in its turn and keeps it while it is sent ([`in_turn`]): it is handed to the connection
//! in pieces of [`PIECE`] bytes, and the turn (and the answer's buffer) go with the last piece.
//! So readers that read slowly, or not at all, hold at most the answers of the turns, not one
//! each: the others wait for a turn and hold nothing yet. The connection itself buffers at most
//! 64 KiB more (`super::connections`).
//!
//! A reader that stops reading cannot keep a turn for long: a write that makes no progress for
//! `super::connections::WRITE_STALL` (10 s) closes its connection, and an answer not taken
//! within [`SEND_GRACE`] plus a second per MiB ([`MIN_RATE`]) is cut there (the reader sees
//! fewer bytes than its `Content-Length`). `/status` waits only behind `/status`, so readers of
//! the runs holding both page turns never hold up the monitoring of the daemon; `/healthz`
//! and `/readyz` take no turn.
//!
//! Why hold the turn rather than stream the JSON run by run: measured with 32 readers on
//! 127.0.0.1 of a `/jobs/{name}/runs` of 8 runs of 1 MiB (8.4 MB) that read nothing for 5 s
//! (the test `history::pages::slow_readers_of_the_runs_hold_two_answers_at_most_and_status_still_answers`,
//! debug build), with the turn given back when the answer was made the daemon's peak went
//! from 29.6 to 88.8 MiB, every answer made in those 5 s held by its reader (and more the
//! longer they wait: 32 answers would be 270 MB); with the turn held until sent, from 29.4 to
//! 35.2 MiB. Streamed run by run, each reader would still hold one run (1 to 6 MiB of JSON)
//! and a blocking thread while it waits for its reader: 64 readers some 64 to 384 MiB. Held
//! turns bound the total whatever the number of readers.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use hyper::body::{Buf, Bytes, Frame, SizeHint};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The turns an answer takes in each pool.
const TURNS: u32 = 2;

/// How much of an answer is handed to the connection at once.
const PIECE: usize = 16 * 1024;

/// Time every answer has to be taken by its reader, besides a second per [`MIN_RATE`] bytes.
pub(crate) const SEND_GRACE: Duration = Duration::from_secs(10);

/// The slowest reading that gets a whole answer (bytes per second, past [`SEND_GRACE`]).
pub(crate) const MIN_RATE: u64 = 1024 * 1024;

/// A turn: given back when dropped.
pub(super) type Turn = OwnedSemaphorePermit;

/// The endpoint's two pools of turns (clones share them).
#[derive(Debug, Clone)]
pub(super) struct Turns {
    /// The pages and the history's JSON answers: each holds the status document, at most one
    /// run's whole output while reading, and its answer.
    history: Arc<Semaphore>,
    /// `/status`: each holds the document (every job's last output tail).
    status: Arc<Semaphore>,
}

impl Default for Turns {
    fn default() -> Turns {
        Turns {
            history: Arc::new(Semaphore::new(TURNS as usize)),
            status: Arc::new(Semaphore::new(TURNS as usize)),
        }
    }
}

impl Turns {
    /// Waits for a turn to read a job's runs.
    pub(super) async fn history_turn(&self) -> Option<Turn> {
        Arc::clone(&self.history).acquire_owned().await.ok()
    }

    /// Waits until no other page or history answer holds runs' output: for an answer that
    /// holds every run's whole output (`/jobs/{name}/runs`, up to `history x 6 x output_tail`
    /// bytes of JSON).
    pub(super) async fn history_alone(&self) -> Option<Turn> {
        Arc::clone(&self.history)
            .acquire_many_owned(TURNS)
            .await
            .ok()
    }

    /// Waits for a turn to make the `/status` document.
    pub(super) async fn status_turn(&self) -> Option<Turn> {
        Arc::clone(&self.status).acquire_owned().await.ok()
    }
}

/// `response` with `body` as its body, keeping `turn` until the last piece of it was handed to
/// the connection (or the connection closed); cut after [`SEND_GRACE`] and a second per
/// [`MIN_RATE`] bytes.
pub(super) fn in_turn(response: Response, body: impl Into<Bytes>, turn: Turn) -> Response {
    let body: Bytes = body.into();
    let rate = Duration::from_secs_f64(body.len() as f64 / MIN_RATE as f64);
    let sending = Sending {
        left: body,
        turn: Some(turn),
        deadline: Instant::now() + SEND_GRACE + rate,
    };
    let (parts, _) = response.into_parts();
    Response::from_parts(parts, Body::new(sending))
}

/// An answer being sent in its turn.
struct Sending {
    /// What is not handed to the connection yet.
    left: Bytes,
    /// Given back with the last piece.
    turn: Option<Turn>,
    /// When the answer is cut if not taken whole.
    deadline: Instant,
}

impl hyper::body::Body for Sending {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        if this.left.is_empty() {
            this.turn = None;
            return Poll::Ready(None);
        }
        if Instant::now() > this.deadline {
            this.left = Bytes::new();
            this.turn = None;
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the reader did not take the answer in time",
            ))));
        }
        // A copy: the connection's buffer must not keep the whole answer alive.
        let n = this.left.len().min(PIECE);
        let piece = Bytes::copy_from_slice(&this.left[..n]);
        this.left.advance(n);
        if this.left.is_empty() {
            this.left = Bytes::new();
            this.turn = None;
        }
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.left.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;
    use hyper::body::Body as _;

    /// The next frame of `body`.
    async fn next<B: hyper::body::Body + Unpin>(
        body: &mut B,
    ) -> Option<Result<Frame<B::Data>, B::Error>> {
        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
    }

    fn semaphore() -> Arc<Semaphore> {
        Arc::new(Semaphore::new(1))
    }

    #[tokio::test]
    async fn the_turn_goes_with_the_last_piece() {
        let semaphore = semaphore();
        let turn = Arc::clone(&semaphore)
            .acquire_owned()
            .await
            .expect("a turn");
        let answer = vec![b'x'; 3 * PIECE + 5];
        let response = in_turn(().into_response(), answer.clone(), turn);
        let mut body = response.into_body();
        assert_eq!(body.size_hint().exact(), Some(answer.len() as u64));
        let mut got = Vec::new();
        while let Some(frame) = next(&mut body).await {
            let data = frame.expect("a piece").into_data().expect("data");
            assert!(data.len() <= PIECE);
            got.extend_from_slice(&data);
            let held = usize::from(got.len() < answer.len());
            assert_eq!(
                semaphore.available_permits(),
                1 - held,
                "after {}",
                got.len()
            );
        }
        assert_eq!(got, answer);
    }

    #[tokio::test]
    async fn an_answer_not_taken_in_time_is_cut_and_its_turn_given_back() {
        let semaphore = semaphore();
        let mut late = Sending {
            left: Bytes::from(vec![b'x'; 3 * PIECE]),
            turn: Some(
                Arc::clone(&semaphore)
                    .acquire_owned()
                    .await
                    .expect("a turn"),
            ),
            deadline: Instant::now() - Duration::from_millis(1),
        };
        assert_eq!(semaphore.available_permits(), 0);
        let cut = next(&mut late).await.expect("an answer");
        assert_eq!(
            cut.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::TimedOut)
        );
        assert_eq!(semaphore.available_permits(), 1);
        assert!(next(&mut late).await.is_none());
    }
}
