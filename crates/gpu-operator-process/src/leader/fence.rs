//! The write fence: the one place every request of the reconcilers' client passes, which lets a
//! mutating request (anything but GET, HEAD and OPTIONS) through only while this process leads.
//! The renewal task closes it the moment leadership is lost, before anyone is told; a write
//! started after that is refused without being sent, and one still in flight then — sent, waiting
//! for its answer or for a retry after a 429 — is cancelled. Reads (lists, watches) always pass,
//! so the caches stay warm while the process waits to lead again.
//!
//! Leader election itself uses a client without the fence: a candidate must write the Lease.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use http::{Method, Request};
use tokio::sync::watch;
use tower::{BoxError, Layer, Service};

/// Whether this process may write; clones share one state.
#[derive(Clone, Debug)]
pub struct Fence {
    open: Arc<watch::Sender<bool>>,
}

/// A write refused or cancelled because this process does not lead.
#[derive(Debug, thiserror::Error)]
#[error(
    "{method} {path} not sent: this process does not hold the leader-election lease (it writes only while it leads)"
)]
pub struct NotLeader {
    method: Method,
    path: String,
}

impl Fence {
    /// A closed fence: nothing is written until [`Self::open`] (leader election opens it).
    pub fn closed() -> Self {
        Self {
            open: Arc::new(watch::channel(false).0),
        }
    }

    /// An open fence, for a process that runs without leader election.
    pub fn always_open() -> Self {
        let fence = Self::closed();
        fence.open();
        fence
    }

    /// Lets writes through (we lead).
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// Stops writes at once, cancelling those in flight.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// Whether writes pass now.
    pub fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Resolves once the fence is closed (at once if it is).
    pub fn until_closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut open = self.open.subscribe();
        async move {
            // The sender lives as long as any fence; if it is gone nobody may write.
            let _ = open.wait_for(|open| !*open).await;
        }
    }

    /// The tower layer that fences a client's requests (`kube::client::ClientBuilder::with_layer`).
    pub fn layer(&self) -> FenceLayer {
        FenceLayer {
            fence: self.clone(),
        }
    }
}

/// Wraps a service in [`Fenced`].
#[derive(Clone, Debug)]
pub struct FenceLayer {
    fence: Fence,
}

impl<S> Layer<S> for FenceLayer {
    type Service = Fenced<S>;

    fn layer(&self, inner: S) -> Fenced<S> {
        Fenced {
            inner,
            fence: self.fence.clone(),
        }
    }
}

/// A service whose mutating requests pass only while the fence is open.
#[derive(Clone, Debug)]
pub struct Fenced<S> {
    inner: S,
    fence: Fence,
}

/// Whether `method` changes nothing on the server.
fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl<S, B> Service<Request<B>> for Fenced<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        if is_read(request.method()) {
            let response = self.inner.call(request);
            return Box::pin(async move { response.await.map_err(Into::into) });
        }
        let refused = NotLeader {
            method: request.method().clone(),
            path: request.uri().path().to_owned(),
        };
        if !self.fence.is_open() {
            return Box::pin(async move { Err(refused.into()) });
        }
        let response = self.inner.call(request);
        let closed = self.fence.until_closed();
        Box::pin(async move {
            tokio::select! {
                biased;
                () = closed => Err(refused.into()),
                response = response => response.map_err(Into::into),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::{
        convert::Infallible,
        sync::atomic::{AtomicUsize, Ordering},
        time::Duration,
    };

    use tower::ServiceExt as _;

    use super::*;

    /// A server that counts the requests that reached it and answers after `delay`.
    #[derive(Clone)]
    struct Server {
        reached: Arc<AtomicUsize>,
        delay: Duration,
    }

    impl Service<Request<()>> for Server {
        type Response = &'static str;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<&'static str, Infallible>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            self.reached.fetch_add(1, Ordering::SeqCst);
            let delay = self.delay;
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                Ok("done")
            })
        }
    }

    fn request(method: Method) -> Request<()> {
        Request::builder()
            .method(method)
            .uri("/apis/apps/v1/namespaces/gpu-operator/daemonsets/x")
            .body(())
            .unwrap()
    }

    fn fenced(fence: &Fence, delay: Duration) -> (Fenced<Server>, Arc<AtomicUsize>) {
        let reached = Arc::new(AtomicUsize::new(0));
        let server = Server {
            reached: reached.clone(),
            delay,
        };
        (fence.layer().layer(server), reached)
    }

    #[tokio::test]
    async fn a_closed_fence_sends_reads_and_no_write() {
        let fence = Fence::closed();
        let (service, reached) = fenced(&fence, Duration::ZERO);
        for method in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert_eq!(
                service.clone().oneshot(request(method)).await.unwrap(),
                "done"
            );
        }
        assert_eq!(
            reached.load(Ordering::SeqCst),
            3,
            "every read reached the server"
        );
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            let error = service.clone().oneshot(request(method)).await.unwrap_err();
            assert!(error.to_string().contains("not sent"), "{error}");
        }
        assert_eq!(
            reached.load(Ordering::SeqCst),
            3,
            "no write reached the server"
        );
        // The positive control: the same writes pass once the fence is open.
        fence.open();
        for method in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(
                service.clone().oneshot(request(method)).await.unwrap(),
                "done"
            );
        }
        assert_eq!(reached.load(Ordering::SeqCst), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn closing_cancels_a_write_in_flight_but_not_a_read() {
        let fence = Fence::always_open();
        let (service, _) = fenced(&fence, Duration::from_secs(5));
        let write = tokio::spawn(service.clone().oneshot(request(Method::PATCH)));
        let read = tokio::spawn(service.clone().oneshot(request(Method::GET)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        fence.close();
        let error = write.await.unwrap().unwrap_err();
        assert!(error.to_string().contains("PATCH"), "{error}");
        assert_eq!(read.await.unwrap().unwrap(), "done");
        assert!(!fence.is_open());
    }
}
