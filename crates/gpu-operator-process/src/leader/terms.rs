//! Leading in terms. A process that loses its Lease (it could not renew within the renew
//! deadline, say while the API server restarts, or another candidate took it) does not exit: its
//! fence is already closed, its reconcilers are stopped at once (their future is dropped, which
//! cancels every request they had in flight), and it becomes a candidate again with the same
//! identity. When the Lease still names it, nobody took over meanwhile and it takes the Lease back
//! at its first attempt (a replace carrying the resourceVersion it read, so a candidate that
//! judged the Lease expired at the same moment loses the race); otherwise it waits one lease
//! duration like any candidate. Each term starts the reconcilers afresh; the caches live on.

use std::{future::Future, pin::pin, time::Duration};

use super::{Error, Fence, Leadership, LeaseParams, acquire_as};

/// How long handing the Lease back may take at the end (an API server that does not answer would
/// otherwise hold the exit; the Lease then expires as if the process had died).
const RELEASE_BOUND: Duration = Duration::from_secs(1);

/// One candidate for one Lease, with the fence its leadership opens and closes.
#[derive(Clone)]
pub struct Elector {
    client: kube::Client,
    namespace: String,
    name: String,
    identity: String,
    params: LeaseParams,
    fence: Fence,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("params", &self.params)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl Elector {
    /// A candidate `identity` for Lease `name` in `namespace`; `client` must not be fenced (the
    /// Lease is written while not leading). The timings are checked here.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        params: LeaseParams,
    ) -> Result<Self, Error> {
        params.validate()?;
        Ok(Self {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            params,
            fence: Fence::closed(),
        })
    }

    /// The fence to put on the reconcilers' client: open exactly while this candidate leads.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// The identity written into the Lease.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this candidate holds the Lease (see [`super::acquire`]); with `led_before`
    /// (it held the Lease in an earlier term) permission errors are retried, not fatal.
    pub async fn acquire(&self, led_before: bool) -> Result<Leadership, Error> {
        acquire_as(
            self.client.clone(),
            (&self.namespace, &self.name, &self.identity),
            self.params,
            self.fence.clone(),
            led_before,
        )
        .await
    }
}

/// Runs `lead(term)` (terms count from 1) each time `elector` holds the Lease, dropping it the
/// moment leadership is lost and trying again, until a term's future finishes (then the Lease is
/// released for a standby) or `stop` resolves while not leading. `lead` must finish when the
/// process shuts down. Fails only when the Lease cannot be used at all (permissions) before the
/// first term; after one, a refusal is an API server that restarted and is retried.
pub async fn run_terms<F, Fut>(
    elector: &Elector,
    stop: impl Future<Output = ()>,
    mut lead: F,
) -> Result<(), Error>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut stop = pin!(stop);
    let mut term = 0_u64;
    loop {
        let leadership = tokio::select! {
            leadership = elector.acquire(term > 0) => leadership?,
            () = &mut stop => return Ok(()),
        };
        term += 1;
        tracing::info!(
            term,
            identity = elector.identity(),
            "leading: reconcilers started"
        );
        let lost = tokio::select! {
            () = lead(term) => None,
            lost = leadership.lost() => Some(lost),
        };
        let Some(reason) = lost else {
            if tokio::time::timeout(RELEASE_BOUND, leadership.release())
                .await
                .is_err()
            {
                tracing::warn!(bound = ?RELEASE_BOUND, "the Lease was not released in time; it will expire");
            }
            return Ok(());
        };
        tracing::warn!(
            term,
            %reason,
            "lost leadership: writes fenced and every reconciler stopped; the caches are kept and the lease is tried again (taken back at once if it still names this process)"
        );
    }
}

#[cfg(test)]
mod tests;
