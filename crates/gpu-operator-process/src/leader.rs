//! Leader election on a `coordination.k8s.io/v1` Lease, as controller-runtime does it: a
//! candidate takes the Lease when it is absent, free, its own, or expired, and every write is a
//! replace carrying the resourceVersion it read, so two candidates can never both win. The holder
//! renews every retry period and gives up when it has not renewed for the renew deadline, which is
//! shorter than the lease duration, so it stops before anybody else may take over: its
//! [`Fence`] closes, its reconcilers stop, and it tries to lead again in place ([`run_terms`]).
//!
//! Expiry is judged on the local monotonic clock — how long the Lease has been seen unchanged —
//! not on the writer's `renewTime`, so clock skew between candidates does not matter. A new
//! candidate therefore waits one lease duration before taking over a Lease whose holder died
//! without releasing it, as controller-runtime does.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{Api, api::PostParams};
use tokio::time::Instant;

pub use self::{
    fence::{Fence, FenceLayer, Fenced, NotLeader},
    renewal::{Leadership, Lost},
    terms::{Elector, run_terms},
};

mod fence;
mod renewal;
mod terms;

/// NVIDIA's leader-election id (`cmd/gpu-operator/main.go`), used as the Lease name, so the Rust
/// operator and NVIDIA's never lead at the same time during a migration.
pub const DEFAULT_LEASE_NAME: &str = "53822513.nvidia.com";

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The timings cannot work.
    #[error(
        "invalid leader-election timings: need lease duration ({lease_duration:?}) > renew deadline ({renew_deadline:?}) > retry period ({retry_period:?}) > 0"
    )]
    InvalidParams {
        /// Lease duration.
        lease_duration: Duration,
        /// Renew deadline.
        renew_deadline: Duration,
        /// Retry period.
        retry_period: Duration,
    },
    /// The API server refused us in a way retrying will not fix.
    #[error(
        "cannot use Lease {namespace}/{name} for leader election: {source}; the operator needs get, create and update on coordination.k8s.io leases in namespace {namespace}"
    )]
    Refused {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Leader-election timings. The defaults are controller-runtime's: 15 s / 10 s / 2 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseParams {
    /// How long a Lease that nobody renews stays held (`leaseDurationSeconds`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// Pause between two attempts to acquire or renew.
    pub retry_period: Duration,
}

impl Default for LeaseParams {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseParams {
    /// NVIDIA's `--leader-lease-renew-deadline`: the lease duration becomes the deadline + 5 s.
    pub fn with_renew_deadline(renew_deadline: Duration) -> Self {
        Self {
            lease_duration: renew_deadline + Duration::from_secs(5),
            renew_deadline,
            ..Self::default()
        }
    }

    /// Checks lease duration > renew deadline > retry period > 0.
    pub fn validate(&self) -> Result<(), Error> {
        let ok = self.lease_duration > self.renew_deadline
            && self.renew_deadline > self.retry_period
            && !self.retry_period.is_zero();
        ok.then_some(()).ok_or(Error::InvalidParams {
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        })
    }

    fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// Who may have the Lease, as one candidate sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Nobody holds it (no holder, or an empty one after a release).
    Free,
    /// We hold it.
    Mine,
    /// `holder` held it, but has not renewed it for its whole duration.
    Expired {
        /// The previous holder.
        holder: String,
    },
    /// `holder` holds it for at least `remaining` more.
    Held {
        /// The current holder.
        holder: String,
        /// Time left before it may be taken, as seen by us.
        remaining: Duration,
    },
}

impl Claim {
    /// Whether we may write ourselves in as holder.
    pub fn may_take(&self) -> bool {
        !matches!(self, Self::Held { .. })
    }
}

/// The pure decision: who may have the Lease whose spec is `spec`, for candidate `identity`, when
/// we have seen this exact spec unchanged for `unchanged_for`. A spec without
/// `leaseDurationSeconds` lasts `default_duration`.
pub fn assess(
    spec: Option<&LeaseSpec>,
    identity: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> Claim {
    let Some(spec) = spec else { return Claim::Free };
    let holder = match spec.holder_identity.as_deref() {
        None | Some("") => return Claim::Free,
        Some(holder) if holder == identity => return Claim::Mine,
        Some(holder) => holder.to_owned(),
    };
    let duration = spec
        .lease_duration_seconds
        .and_then(|seconds| u64::try_from(seconds).ok())
        .map_or(default_duration, Duration::from_secs);
    match duration.checked_sub(unchanged_for) {
        Some(remaining) if !remaining.is_zero() => Claim::Held { holder, remaining },
        _ => Claim::Expired { holder },
    }
}

/// The spec that makes `identity` the holder, from the `current` one (`None`: a new Lease).
/// Acquire time and the transition count change only when the holder changes — also from
/// nobody, after a release — as client-go counts them.
pub fn claimed_spec(
    current: Option<&LeaseSpec>,
    identity: &str,
    params: &LeaseParams,
    now: Timestamp,
) -> LeaseSpec {
    let existed = current.is_some();
    let current = current.cloned().unwrap_or_default();
    let ours = current.holder_identity.as_deref() == Some(identity);
    LeaseSpec {
        holder_identity: Some(identity.to_owned()),
        lease_duration_seconds: Some(params.lease_duration_seconds()),
        acquire_time: if ours {
            current.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: match (ours, existed) {
            (true, _) => current.lease_transitions,
            (false, true) => Some(current.lease_transitions.unwrap_or(0).saturating_add(1)),
            (false, false) => Some(0),
        },
        ..current
    }
}

/// Waits until `identity` holds Lease `name` in `namespace` (creating it if absent, taking it
/// back at once when it still names `identity`), then opens `fence` and starts renewing it.
/// Transient API errors are logged and retried; permission errors fail.
pub async fn acquire(
    client: kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
    params: LeaseParams,
    fence: Fence,
) -> Result<Leadership, Error> {
    acquire_as(client, (namespace, name, identity), params, fence, false).await
}

/// [`acquire`]; with `led_before`, permission errors are retried too: the process held this
/// Lease before, and an API server that has just restarted refuses (403) until its authorizer's
/// caches are filled again.
pub(crate) async fn acquire_as(
    client: kube::Client,
    (namespace, name, identity): (&str, &str, &str),
    params: LeaseParams,
    fence: Fence,
    led_before: bool,
) -> Result<Leadership, Error> {
    params.validate()?;
    let api = Api::<Lease>::namespaced(client, namespace);
    let refused = |source| Error::Refused {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    };
    // The spec we last saw and since when, to judge expiry on our own clock.
    let mut seen: Option<(Option<LeaseSpec>, Instant)> = None;
    let mut waiting_logged_for: Option<String> = None;
    loop {
        match try_acquire(&api, name, identity, &params, &mut seen).await {
            Ok(Some(lease)) => {
                tracing::info!(lease = name, namespace, identity, "became the leader");
                return Ok(renewal::start(api, name, identity, params, lease, fence));
            }
            Ok(None) => {
                if let Some((Some(spec), _)) = &seen {
                    let holder = spec.holder_identity.clone().unwrap_or_default();
                    if waiting_logged_for.as_ref() != Some(&holder) {
                        tracing::info!(lease = name, namespace, %holder, "another instance leads; waiting");
                        waiting_logged_for = Some(holder);
                    }
                }
            }
            Err(error) if is_permanent(&error) && !led_before => return Err(refused(error)),
            Err(error) => {
                tracing::warn!(lease = name, namespace, %error, "acquiring the lease failed; retrying");
            }
        }
        tokio::time::sleep(params.retry_period).await;
    }
}

/// One attempt: `Some(lease)` once we hold it, `None` when another holds it or won a race.
async fn try_acquire(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    params: &LeaseParams,
    seen: &mut Option<(Option<LeaseSpec>, Instant)>,
) -> Result<Option<Lease>, kube::Error> {
    let Some(current) = api.get_opt(name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(claimed_spec(None, identity, params, Timestamp::now())),
        };
        return ignore_conflict(api.create(&PostParams::default(), &lease).await);
    };
    let now = Instant::now();
    let since = match seen.take() {
        Some((spec, since)) if spec == current.spec => since,
        _ => now,
    };
    *seen = Some((current.spec.clone(), since));
    let claim = assess(
        current.spec.as_ref(),
        identity,
        now - since,
        params.lease_duration,
    );
    if !claim.may_take() {
        return Ok(None);
    }
    if let Claim::Expired { holder } = &claim {
        tracing::info!(lease = name, %holder, "the lease expired; taking it over");
    }
    ignore_conflict(replace_spec(api, name, current, identity, params).await)
}

/// Writes `identity` in as holder of `current`, with `current`'s resourceVersion as precondition.
async fn replace_spec(
    api: &Api<Lease>,
    name: &str,
    mut current: Lease,
    identity: &str,
    params: &LeaseParams,
) -> Result<Lease, kube::Error> {
    current.spec = Some(claimed_spec(
        current.spec.as_ref(),
        identity,
        params,
        Timestamp::now(),
    ));
    api.replace(name, &PostParams::default(), &current).await
}

/// A 409 (AlreadyExists on create, a stale resourceVersion on replace) means someone else wrote
/// first: not an error, just not ours.
fn ignore_conflict(result: Result<Lease, kube::Error>) -> Result<Option<Lease>, kube::Error> {
    match result {
        Ok(lease) => Ok(Some(lease)),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(None),
        Err(error) => Err(error),
    }
}

fn is_permanent(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if matches!(status.code, 401 | 403 | 404))
}

#[cfg(test)]
mod tests;
