//! Reading an answer's body with a size cap. reqwest has no body-size limit of its own, so
//! [`read_body`] refuses an announced length over the cap at once and otherwise reads chunk by
//! chunk, stopping as soon as the cap would be passed: a server that is not the one meant (or
//! a broken one) cannot make a client hold an unbounded answer in memory.

/// The body of `response`, or what went wrong: a transport error, or more than `limit` bytes
/// (the message then says how large the limit is).
pub(crate) async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Why [`read_body`] failed.
pub(crate) enum BodyError {
    /// The connection failed while reading.
    Transport(reqwest::Error),
    /// The answer was larger than this many bytes.
    TooLarge(usize),
}
