//! Malformed requests are the client's fault: INVALID_ARGUMENT, not INTERNAL.
//!
//! tonic decodes a request before any Portal code runs and reports a
//! protobuf decode failure (say, bytes that are not UTF-8 in a `string`
//! field) as INTERNAL. [`DecodeErrors`] wraps the service and rewrites those
//! answers to INVALID_ARGUMENT with the field prost names, so a client sees
//! what to fix instead of a daemon bug.

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;

/// How tonic begins the message of a decode failure.
const DECODE_FAILURE: &str = "failed to decode Protobuf message: ";

/// The wrapper (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct DecodeErrors<S>(pub(crate) S);

impl<S: NamedService> NamedService for DecodeErrors<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for DecodeErrors<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let answer = self.0.call(req);
        Box::pin(async move { Ok(rewrite(answer.await?)) })
    }
}

/// Rewrites a decode failure; passes everything else through.
fn rewrite(resp: http::Response<Body>) -> http::Response<Body> {
    match Status::from_header_map(resp.headers()) {
        Some(s) if s.code() == tonic::Code::Internal => match invalid_argument(s.message()) {
            Some(status) => status.into_http(),
            None => resp,
        },
        _ => resp,
    }
}

/// The INVALID_ARGUMENT for a decode failure message, if it is one.
fn invalid_argument(message: &str) -> Option<Status> {
    let detail = message.strip_prefix(DECODE_FAILURE)?;
    let text = if detail.contains("not UTF-8") {
        // prost names the field first: "StartRequest.command: invalid string value: …".
        let field = detail.split(": ").next().unwrap_or(detail);
        format!(
            "{field} must be UTF-8 text ({detail}); send raw bytes only in bytes fields such as WriteRequest.data"
        )
    } else {
        format!("malformed request: {detail}")
    };
    Some(super::status::status(
        tonic::Code::InvalidArgument,
        portal_proto::v1::ErrorKind::BadRequest,
        text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_failures_name_the_field() {
        let s = invalid_argument(
            "failed to decode Protobuf message: StartRequest.command: invalid string value: data is not UTF-8 encoded",
        )
        .unwrap();
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert!(
            s.message().starts_with("StartRequest.command must be UTF-8 text"),
            "{}",
            s.message()
        );
    }

    #[test]
    fn other_internal_errors_pass_through() {
        assert!(invalid_argument("database error: disk I/O error").is_none());
        let s = invalid_argument("failed to decode Protobuf message: buffer underflow").unwrap();
        assert_eq!(s.message(), "malformed request: buffer underflow");
    }
}
