//! How an operation that did not succeed ended: for the history, `fail`
//! (the broker said no, or nothing was sent) or `info` (it may have
//! happened).

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Certainly not done: an error answer (its code), or no connection.
    Refused(String),
    /// Maybe done: sent, and no answer came.
    Unknown(String),
}

impl Outcome {
    /// The broker's error code or what went wrong.
    pub fn why(&self) -> &str {
        match self {
            Outcome::Refused(s) | Outcome::Unknown(s) => s,
        }
    }
}
