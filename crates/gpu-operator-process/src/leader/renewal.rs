//! Holding the Lease: the background task that renews it every retry period, notices when it is
//! taken or cannot be renewed within the renew deadline ([`Leadership::lost`]), and hands it over
//! on a graceful shutdown ([`Leadership::release`]).

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, api::PostParams};
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
    time::Instant,
};

use super::{Fence, LeaseParams, ignore_conflict, replace_spec};

/// Why leadership ended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Lost {
    /// Somebody else wrote themselves in as holder (or deleted the Lease).
    #[error("the lease is now held by {holder:?}")]
    Taken {
        /// The new holder; empty when the Lease is free or gone.
        holder: String,
    },
    /// Renewal kept failing for the whole renew deadline.
    #[error("could not renew the lease within the renew deadline: {last_error}")]
    RenewDeadline {
        /// The last renewal error.
        last_error: String,
    },
    /// The renewal task ended unexpectedly (panicked, or the runtime is going away).
    #[error("the lease renewal task stopped")]
    TaskStopped,
}

/// We hold the Lease. A background task renews it until [`Self::release`] or until it is lost.
#[derive(Debug)]
pub struct Leadership {
    api: Api<Lease>,
    name: String,
    identity: String,
    lost: watch::Receiver<Option<Lost>>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Option<Lease>>,
    fence: Fence,
}

pub(super) fn start(
    api: Api<Lease>,
    name: &str,
    identity: &str,
    params: LeaseParams,
    lease: Lease,
    fence: Fence,
) -> Leadership {
    let (lost_tx, lost) = watch::channel(None);
    fence.open();
    let (stop, stop_rx) = oneshot::channel();
    let task = tokio::spawn(renew(
        api.clone(),
        name.to_owned(),
        identity.to_owned(),
        params,
        lease,
        (lost_tx, fence.clone()),
        stop_rx,
    ));
    Leadership {
        api,
        name: name.to_owned(),
        identity: identity.to_owned(),
        lost,
        stop: Some(stop),
        task,
        fence,
    }
}

/// Renews every retry period until told to stop (returns the last Lease we wrote, for the
/// release) or until leadership is lost (closes `fence`, reports why on `lost`, returns `None`).
async fn renew(
    api: Api<Lease>,
    name: String,
    identity: String,
    params: LeaseParams,
    mut lease: Lease,
    (lost, fence): (watch::Sender<Option<Lost>>, Fence),
    mut stop: oneshot::Receiver<()>,
) -> Option<Lease> {
    let mut last_renewal = Instant::now();
    let reason = loop {
        tokio::select! {
            _ = &mut stop => return Some(lease),
            () = tokio::time::sleep(params.retry_period) => {}
        }
        // Like client-go, no attempt may run past the renew deadline.
        let left = params.renew_deadline.saturating_sub(last_renewal.elapsed());
        let attempt = tokio::time::timeout(
            left,
            renew_once(&api, &name, &identity, &params, lease.clone()),
        );
        let last_error = match attempt.await {
            Ok(Ok(Renewal::Renewed(renewed))) => {
                lease = *renewed;
                last_renewal = Instant::now();
                continue;
            }
            Ok(Ok(Renewal::Taken(holder))) => break Lost::Taken { holder },
            Ok(Ok(Renewal::Raced)) => "the lease changed while renewing".to_owned(),
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {left:?}"),
        };
        if last_renewal.elapsed() + params.retry_period >= params.renew_deadline {
            break Lost::RenewDeadline { last_error };
        }
        tracing::warn!(lease = %name, error = %last_error, "renewing the lease failed; retrying");
    };
    // Writes stop before anybody hears of the loss.
    fence.close();
    tracing::error!(lease = %name, %reason, "lost leadership");
    lost.send_replace(Some(reason));
    None
}

/// The outcome of one renewal attempt.
enum Renewal {
    /// Renewed; this is the Lease as written.
    Renewed(Box<Lease>),
    /// Somebody else holds the Lease now (empty: nobody, or it was deleted).
    Taken(String),
    /// The Lease changed twice under us, still naming us; try again next period.
    Raced,
}

/// One renewal: replace with the resourceVersion we last wrote; on a conflict, read the Lease and
/// either notice it was taken or renew on top of the change (e.g. somebody added a label).
async fn renew_once(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    params: &LeaseParams,
    lease: Lease,
) -> Result<Renewal, kube::Error> {
    if let Some(renewed) = ignore_conflict(replace_spec(api, name, lease, identity, params).await)?
    {
        return Ok(Renewal::Renewed(Box::new(renewed)));
    }
    let Some(current) = api.get_opt(name).await? else {
        return Ok(Renewal::Taken(String::new()));
    };
    let holder = current
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.clone())
        .unwrap_or_default();
    if holder != identity {
        return Ok(Renewal::Taken(holder));
    }
    Ok(
        ignore_conflict(replace_spec(api, name, current, identity, params).await)?
            .map_or(Renewal::Raced, |renewed| {
                Renewal::Renewed(Box::new(renewed))
            }),
    )
}

impl Leadership {
    /// The identity we hold the Lease as.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether we still hold the Lease, as far as we know.
    pub fn is_leader(&self) -> bool {
        self.lost.borrow().is_none() && !self.task.is_finished()
    }

    /// Resolves once leadership is lost: the Lease was taken, or renewal failed for the whole
    /// renew deadline. The fence is closed by then; the reconcilers must stop (see
    /// [`super::run_terms`]).
    pub async fn lost(&self) -> Lost {
        let mut lost = self.lost.clone();
        match lost.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or(Lost::TaskStopped),
            Err(_) => Lost::TaskStopped,
        }
    }

    /// Stops renewing and clears `holderIdentity`, so a standby takes over at once (graceful
    /// shutdown). Failures are logged: the Lease then simply expires.
    pub async fn release(mut self) {
        self.fence.close();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Ok(Some(mut lease)) = (&mut self.task).await else {
            tracing::info!(lease = %self.name, "leadership was already lost; nothing to release");
            return;
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.acquire_time = None;
            spec.renew_time = None;
        }
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the lease"),
            Err(error) => {
                tracing::warn!(lease = %self.name, %error, "releasing the lease failed; it will expire");
            }
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        // Without `release`, stop writing and renewing: the Lease expires after its duration.
        self.fence.close();
        self.task.abort();
    }
}
