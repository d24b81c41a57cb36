//! What a request body gets, as the relay holds it until the edge renders it, once
//! ([`Body::render`]): each request's [`Response`] (an id and an [`Answer`], or a response text
//! that came whole), one or a batch's.

use super::{batch, Answer, Id, RpcError};

/// One JSON-RPC response (JSON-RPC 2.0, section 5).
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    /// `answer` (a `result` or an `error`) for the request `id`.
    Answer {
        /// The request's id (`null` for a request whose id could not be read).
        id: Id,
        /// What it gets.
        answer: Answer,
    },
    /// A response that came whole: the upstream's own text, relayed unchanged (its id was sent
    /// as the client wrote it), or a WebSocket subscription call's.
    Text(String),
}

impl Response {
    /// `answer` for the request `id`.
    pub fn new(id: &Id, answer: Answer) -> Self {
        Response::Answer {
            id: id.clone(),
            answer,
        }
    }

    /// `error` for the request `id`.
    pub fn error(id: &Id, error: &RpcError) -> Self {
        Response::new(id, Answer::error(error))
    }

    /// The response object as JSON text.
    pub fn render(&self) -> String {
        match self {
            Response::Answer { id, answer } => answer.render(id),
            Response::Text(text) => text.clone(),
        }
    }
}

/// A reply's body: one request's response, or a batch's responses in order (JSON-RPC 2.0,
/// section 6).
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// A single request's.
    One(Response),
    /// A batch's (never empty: a batch of notifications only has no body).
    Batch(Vec<Response>),
}

impl Body {
    /// The body as JSON text.
    pub fn render(&self) -> String {
        match self {
            Body::One(response) => response.render(),
            Body::Batch(responses) => {
                let texts: Vec<String> = responses.iter().map(Response::render).collect();
                batch(&texts)
            }
        }
    }
}
