//! The runtime around the reconcilers: the `gpu-operator run` command line ([`config`]), tracing
//! ([`telemetry`]), the metrics and probe HTTP servers ([`admin`]), the one SIGTERM/SIGINT fan-out
//! ([`shutdown`]) and Lease-based leader election ([`leader`]). It knows no reconciler.
//!
//! # How the binary puts it together
//!
//! The order matters: probes must answer before the (possibly slow) first list of every cache,
//! readiness must wait for the caches, and only the leader may write.
//!
//! 1. **Parse** [`config::RunArgs`] (flags and `OPERATOR_NAMESPACE`/`POD_NAME`), then
//!    [`config::RunArgs::namespace`] so a missing namespace fails before anything starts.
//! 2. **Telemetry:** [`telemetry::init`] with `--log-level`/`RUST_LOG` and `--log-format`, then
//!    [`telemetry::log_build_info`].
//! 3. **Client:** [`config::RunArgs::client`] (`--kubeconfig`, else `KUBECONFIG`, else in-cluster).
//! 4. **Shutdown and admin servers:** [`admin::Readiness::default`], [`shutdown::Shutdown::new`]
//!    with it, [`shutdown::Shutdown::listen_for_signals`], then [`admin::serve`] with the metrics
//!    registry. `/healthz` answers from here on; `/readyz` says 503 until step 6.
//! 5. **Caches:** start the shared reflectors (`gpu_operator_core::stores::start`) and poll their
//!    driver in a task.
//! 6. **Wait synced:** `Stores::wait_until_ready`, then [`admin::Readiness::set_ready`].
//! 7. **Leader election** (only with `--leader-elect`): [`leader::acquire`] with
//!    [`config::RunArgs::lease_identity`] and [`config::RunArgs::lease_params`], raced against
//!    [`shutdown::Shutdown::signal`] so a SIGTERM while waiting exits at once.
//! 8. **Controllers:** build each Controller once, with
//!    `.graceful_shutdown_on(shutdown.signal())`, and run them all.
//! 9. **Run until** the controllers finish (after a signal) or [`leader::Leadership::lost`]
//!    resolves — then trigger the shutdown and exit non-zero, since a process that lost the lease
//!    must not write again. On a graceful exit call [`leader::Leadership::release`] so a standby
//!    takes over at once, and [`admin::AdminServers::join`].

pub mod admin;
pub mod config;
pub mod leader;
pub mod shutdown;
pub mod telemetry;
