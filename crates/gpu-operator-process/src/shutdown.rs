//! The one shutdown fan-out: SIGTERM or SIGINT (or [`Shutdown::trigger`]) resolves every
//! [`Shutdown::signal`] future — each Controller's `graceful_shutdown_on` and the HTTP servers —
//! and flips `/readyz` to 503 first. A second signal exits the process at once.
//!
//! Winding down is bounded: [`Shutdown::bounded`] gives the reconcilers [`GRACE`] after the signal
//! to finish what they are doing (a reconcile waiting on a slow API server or webhook, an upgrade
//! step, a held status write would otherwise hold the process for as long as they take) and then
//! drops them, which cancels their requests; everything they write is recomputed by the next
//! leader from the cluster, so nothing is lost but time.

use std::{future::Future, time::Duration};

use tokio::sync::watch;

use crate::admin::Readiness;

/// Installing a signal handler failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for {signal}: {source}")]
pub struct Error {
    signal: &'static str,
    #[source]
    source: std::io::Error,
}

/// How long the reconcilers may take to finish after the shutdown began (see [`Shutdown::bounded`]).
pub const GRACE: Duration = Duration::from_secs(2);

/// Cheap-to-clone handle on the process's shutdown.
#[derive(Clone, Debug)]
pub struct Shutdown {
    triggered: watch::Sender<bool>,
    readiness: Readiness,
}

impl Shutdown {
    /// A shutdown that has not begun; triggering it marks `readiness` as shutting down.
    pub fn new(readiness: Readiness) -> Self {
        let (triggered, _) = watch::channel(false);
        Self {
            triggered,
            readiness,
        }
    }

    /// Begins the shutdown: readiness turns false, then every [`Self::signal`] resolves.
    /// Idempotent.
    pub fn trigger(&self) {
        self.readiness.set_shutting_down();
        let changed = self
            .triggered
            .send_if_modified(|triggered| !std::mem::replace(triggered, true));
        if changed {
            tracing::info!("shutting down");
        }
    }

    /// Whether the shutdown has begun.
    pub fn is_triggered(&self) -> bool {
        *self.triggered.borrow()
    }

    /// A future that resolves once the shutdown has begun (at once if it already has). It is
    /// `Send + Sync + 'static`, as `Controller::graceful_shutdown_on` wants.
    pub fn signal(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        let mut triggered = self.triggered.subscribe();
        async move {
            // The sender lives in `self`; if every handle is gone nobody can trigger any more,
            // and resolving is the only safe answer.
            let _ = triggered.wait_for(|triggered| *triggered).await;
        }
    }

    /// Runs `work` to its end, or until `grace` has passed since the shutdown began, whichever
    /// comes first; says whether it ended by itself. Dropping `work` cancels whatever it awaits.
    pub async fn bounded(&self, work: impl Future<Output = ()>, grace: Duration) -> bool {
        let signal = self.signal();
        let deadline = async move {
            signal.await;
            tokio::time::sleep(grace).await;
        };
        tokio::select! {
            () = work => true,
            () = deadline => {
                tracing::warn!(?grace, "reconcilers still busy after the shutdown grace; stopping them where they are");
                false
            }
        }
    }

    /// Spawns the task that triggers the shutdown on the first SIGTERM or SIGINT and exits the
    /// process (status 130) on the second. Needs a Tokio runtime.
    pub fn listen_for_signals(&self) -> Result<tokio::task::JoinHandle<()>, Error> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).map_err(|source| Error {
            signal: "SIGTERM",
            source,
        })?;
        let mut int = signal(SignalKind::interrupt()).map_err(|source| Error {
            signal: "SIGINT",
            source,
        })?;
        let shutdown = self.clone();
        Ok(tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!(
                signal = name,
                "received signal; shutting down gracefully (send it again to exit at once)"
            );
            shutdown.trigger();
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::warn!(signal = name, "received a second signal; exiting now");
            std::process::exit(130);
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn assert_send_sync_static<T: Send + Sync + 'static>(_: &T) {}

    #[tokio::test]
    async fn trigger_resolves_every_signal_and_flips_readiness() {
        let readiness = Readiness::default();
        readiness.set_ready();
        let shutdown = Shutdown::new(readiness.clone());
        let before = shutdown.signal();
        assert_send_sync_static(&before);
        let pending = tokio::time::timeout(Duration::from_millis(20), shutdown.signal()).await;
        assert!(pending.is_err(), "signal resolved before the trigger");
        assert!(!shutdown.is_triggered());

        shutdown.clone().trigger();
        before.await;
        shutdown.signal().await; // made after the trigger: resolves at once
        assert!(shutdown.is_triggered());
        assert!(!readiness.is_ready());
        shutdown.trigger(); // idempotent
    }

    /// Sends one real SIGTERM to this test process (a second would exit it, by design).
    #[tokio::test]
    async fn sigterm_triggers_the_shutdown() {
        let readiness = Readiness::default();
        readiness.set_ready();
        let shutdown = Shutdown::new(readiness.clone());
        let _listener = shutdown.listen_for_signals().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(5), shutdown.signal())
            .await
            .unwrap();
        assert!(!readiness.is_ready());
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_work_ends_by_itself_or_a_grace_after_the_shutdown() {
        let shutdown = Shutdown::new(Readiness::default());
        let quick = shutdown.bounded(tokio::time::sleep(Duration::from_secs(60)), GRACE);
        assert!(
            quick.await,
            "work that ends before any shutdown runs to its end"
        );

        let stuck = std::future::pending::<()>();
        let started = tokio::time::Instant::now();
        let trigger = {
            let shutdown = shutdown.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                shutdown.trigger();
            }
        };
        let (ended, ()) = tokio::join!(shutdown.bounded(stuck, GRACE), trigger);
        assert!(!ended, "work that never ends is stopped");
        assert_eq!(started.elapsed(), Duration::from_secs(30) + GRACE);

        let finishing = tokio::time::sleep(Duration::from_secs(1));
        assert!(
            shutdown.bounded(finishing, GRACE).await,
            "work that ends within the grace ends by itself"
        );
    }

    #[tokio::test]
    async fn signal_resolves_when_every_handle_is_gone() {
        let shutdown = Shutdown::new(Readiness::default());
        let signal = shutdown.signal();
        drop(shutdown);
        tokio::time::timeout(Duration::from_secs(1), signal)
            .await
            .unwrap();
    }
}
