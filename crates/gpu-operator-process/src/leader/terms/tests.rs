//! The state transitions of leading in terms, against an in-memory Lease API (resourceVersion
//! preconditions as the API server checks them) whose Lease requests can be made to fail, on the
//! paused Tokio clock: lead → lost (renewal fails) → fenced and stopped → lead again, at once when
//! the Lease still names us and after a whole lease duration when another candidate wrote itself
//! in. A writer outside the terms writes through the fenced client all along, so the tests see
//! which writes reached the server and when.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::client::Body;
use serde_json::json;
use tokio::time::Instant;
use tower::Service;

use super::*;

const NAMESPACE: &str = "gpu-operator";
const NAME: &str = "53822513.nvidia.com";
/// The chaos harness's timings (`--leader-lease-renew-deadline 8`): 13 s / 8 s / 2 s.
fn params() -> LeaseParams {
    LeaseParams::with_renew_deadline(Duration::from_secs(8))
}

/// What the fake API server holds and saw.
#[derive(Default)]
struct State {
    lease: Option<Lease>,
    version: u64,
    /// Lease requests fail (a connection error) while set.
    leases_down: bool,
    /// Lease requests are refused (403, as by an API server whose authorizer is not synced yet).
    leases_forbidden: bool,
    /// When each non-Lease write reached the server.
    writes: Vec<Duration>,
}

#[derive(Clone)]
struct FakeApi {
    state: Arc<Mutex<State>>,
    start: Instant,
}

impl FakeApi {
    fn new() -> Self {
        Self {
            state: Arc::default(),
            start: Instant::now(),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn holder(&self) -> Option<String> {
        self.with(|s| {
            s.lease
                .as_ref()
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.holder_identity.clone())
        })
    }

    fn transitions(&self) -> Option<i32> {
        self.with(|s| {
            s.lease
                .as_ref()
                .and_then(|l| l.spec.as_ref())
                .and_then(|s| s.lease_transitions)
        })
    }

    /// Another candidate writes itself in (as it would after judging the Lease expired).
    fn taken_by(&self, holder: &str) {
        self.with(|s| {
            s.version += 1;
            let lease = s.lease.as_mut().unwrap();
            lease.metadata.resource_version = Some(s.version.to_string());
            let spec = lease.spec.as_mut().unwrap();
            spec.holder_identity = Some(holder.to_owned());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        });
    }

    fn client(&self, fence: Option<&Fence>) -> kube::Client {
        match fence {
            Some(fence) => {
                kube::Client::new(tower::Layer::layer(&fence.layer(), self.clone()), NAMESPACE)
            }
            None => kube::Client::new(self.clone(), NAMESPACE),
        }
    }

    fn answer(
        &self,
        method: &Method,
        path: &str,
        body: &[u8],
    ) -> Result<(StatusCode, String), String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if !path.contains("/leases") {
            state.writes.push(self.start.elapsed());
            return Ok((StatusCode::OK, "{}".to_owned()));
        }
        if state.leases_down {
            return Err("connection refused".to_owned());
        }
        let status = |code: StatusCode, reason: &str| {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": reason, "reason": reason, "code": code.as_u16()});
            Ok((code, status.to_string()))
        };
        if state.leases_forbidden {
            return status(StatusCode::FORBIDDEN, "Forbidden");
        }
        match *method {
            Method::GET => match &state.lease {
                Some(lease) => Ok((StatusCode::OK, serde_json::to_string(lease).unwrap())),
                None => status(StatusCode::NOT_FOUND, "NotFound"),
            },
            Method::POST | Method::PUT => {
                let mut lease: Lease = serde_json::from_slice(body).unwrap();
                let current = state
                    .lease
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone());
                let conflict = match *method {
                    Method::POST => current.is_some(),
                    _ => current != lease.metadata.resource_version,
                };
                if conflict {
                    return status(StatusCode::CONFLICT, "Conflict");
                }
                state.version += 1;
                lease.metadata.resource_version = Some(state.version.to_string());
                state.lease = Some(lease.clone());
                Ok((StatusCode::OK, serde_json::to_string(&lease).unwrap()))
            }
            _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
        }
    }
}

impl Service<Request<Body>> for FakeApi {
    type Response = Response<Body>;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), tower::BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let api = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let (code, text) = api.answer(&parts.method, parts.uri.path(), &body)?;
            Ok(Response::builder()
                .status(code)
                .body(Body::from(text.into_bytes()))?)
        })
    }
}

/// What the terms did, and when.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<(String, Duration)>>>);

impl Journal {
    fn push(&self, event: String, at: Duration) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((event, at));
    }

    fn at(&self, event: &str) -> Option<Duration> {
        let events = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        events.iter().find(|(e, _)| e == event).map(|(_, at)| *at)
    }
}

/// Marks the end of a term when its future is dropped.
struct EndOfTerm(Journal, u64, Instant);

impl Drop for EndOfTerm {
    fn drop(&mut self) {
        self.0
            .push(format!("term {} stopped", self.1), self.2.elapsed());
    }
}

/// Starts a candidate "me" whose terms run until dropped, and a writer that writes every 500 ms
/// through the fenced client, outside the terms.
fn start(api: &FakeApi) -> (Journal, Fence) {
    let elector = Elector::new(api.client(None), NAMESPACE, NAME, "me", params()).unwrap();
    let fence = elector.fence();
    let journal = Journal::default();
    let (terms, start) = (journal.clone(), api.start);
    tokio::spawn(async move {
        run_terms(&elector, std::future::pending(), |term| {
            terms.push(format!("term {term} started"), start.elapsed());
            let end = EndOfTerm(terms.clone(), term, start);
            async move {
                let _end = end;
                std::future::pending::<()>().await;
            }
        })
        .await
    });
    let writer = api.client(Some(&fence));
    tokio::spawn(async move {
        loop {
            let request = Request::patch("/api/v1/namespaces/gpu-operator/configmaps/x")
                .body(b"{}".to_vec())
                .unwrap();
            let _ = writer.request_text(request).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    (journal, fence)
}

fn writes_between(api: &FakeApi, from: Duration, to: Duration) -> usize {
    api.with(|s| s.writes.iter().filter(|at| (from..to).contains(at)).count())
}

async fn until(api: &FakeApi, at: u64) {
    tokio::time::sleep_until(api.start + Duration::from_secs(at)).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_writing_and_takes_its_lease_back_at_once() {
    let api = FakeApi::new();
    let (journal, fence) = start(&api);
    until(&api, 1).await;
    assert_eq!(journal.at("term 1 started"), Some(Duration::ZERO));
    assert!(fence.is_open());
    api.with(|s| s.leases_down = true);
    until(&api, 12).await;
    let lost = journal.at("term 1 stopped").expect("term 1 stopped");
    assert!(
        lost <= params().renew_deadline,
        "stopped {lost:?} after its last renewal, past the renew deadline"
    );
    assert!(!fence.is_open(), "the fence is closed while not leading");
    // The API server is back, but refuses for a second (its authorizer's caches fill).
    api.with(|s| {
        s.leases_down = false;
        s.leases_forbidden = true;
    });
    until(&api, 13).await;
    api.with(|s| s.leases_forbidden = false);
    until(&api, 20).await;
    let again = journal.at("term 2 started").expect("term 2 started");
    assert!(
        again <= Duration::from_secs(13) + params().retry_period,
        "took its own Lease back at {again:?}, not at the first attempt after the API returned"
    );
    assert!(fence.is_open());
    assert_eq!(api.holder().as_deref(), Some("me"));
    assert_eq!(api.transitions(), Some(0), "the holder never changed");
    // The writer reached the server while leading (the positive control), never between.
    assert!(writes_between(&api, Duration::ZERO, lost) > 0);
    assert!(writes_between(&api, again, Duration::from_secs(20)) > 0);
    assert_eq!(
        writes_between(&api, lost, again),
        0,
        "a write reached the server while not leading"
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_lease_was_taken_waits_a_lease_duration_like_any_candidate() {
    let api = FakeApi::new();
    let (journal, fence) = start(&api);
    until(&api, 1).await;
    api.with(|s| s.leases_down = true);
    until(&api, 10).await;
    assert!(journal.at("term 1 stopped").is_some());
    // Another candidate takes the Lease (then dies without renewing it).
    api.taken_by("other");
    until(&api, 12).await;
    api.with(|s| s.leases_down = false);
    until(&api, 24).await;
    assert_eq!(
        journal.at("term 2 started"),
        None,
        "took a Lease another holds"
    );
    assert!(!fence.is_open());
    assert_eq!(api.holder().as_deref(), Some("other"));
    until(&api, 30).await;
    let again = journal.at("term 2 started").expect("term 2 started");
    // First seen at 12-14 s on our clock, unchanged for the lease duration of 13 s.
    assert!(
        again >= Duration::from_secs(12) + params().lease_duration,
        "took over at {again:?}, before a whole lease duration passed"
    );
    assert_eq!(api.holder().as_deref(), Some("me"));
    assert_eq!(api.transitions(), Some(2), "other took it, then we did");
    let lost = journal.at("term 1 stopped").unwrap_or_default();
    assert_eq!(writes_between(&api, lost, again), 0);
    assert!(writes_between(&api, again, Duration::from_secs(30)) > 0);
}

#[tokio::test(start_paused = true)]
async fn a_finished_term_releases_the_lease_and_ends() {
    let api = FakeApi::new();
    let elector = Elector::new(api.client(None), NAMESPACE, NAME, "me", params()).unwrap();
    let fence = elector.fence();
    let mut terms = 0;
    run_terms(&elector, std::future::pending(), |_| {
        terms += 1;
        tokio::time::sleep(Duration::from_secs(5))
    })
    .await
    .unwrap();
    assert_eq!(terms, 1);
    assert_eq!(api.holder(), None, "released for a standby");
    assert!(!fence.is_open());
}

#[tokio::test(start_paused = true)]
async fn a_refusal_before_the_first_term_is_an_error() {
    let api = FakeApi::new();
    api.with(|s| s.leases_forbidden = true);
    let elector = Elector::new(api.client(None), NAMESPACE, NAME, "me", params()).unwrap();
    let error = run_terms(&elector, std::future::pending(), |_| async {
        panic!("led without the Lease")
    })
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("get, create and update"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn stop_ends_a_candidate_that_waits() {
    let api = FakeApi::new();
    api.with(|s| s.leases_down = true);
    let elector = Elector::new(api.client(None), NAMESPACE, NAME, "me", params()).unwrap();
    run_terms(
        &elector,
        tokio::time::sleep(Duration::from_secs(7)),
        |_| async { panic!("led without the Lease") },
    )
    .await
    .unwrap();
    assert_eq!(api.holder(), None);
}
