//! The process around the reconcilers: the `gpu-operator run` command line ([`config`]), tracing
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
//! 3. **Clients:** with `--leader-elect`, a [`leader::Elector`] on [`config::RunArgs::client`]
//!    with [`config::RunArgs::lease_identity`] and [`config::RunArgs::lease_params`]; the
//!    reconcilers' client is [`config::RunArgs::fenced_client`] behind the elector's
//!    [`leader::Fence`] (always open without leader election), so no write leaves the process
//!    while it does not lead.
//! 4. **Shutdown and admin servers:** [`admin::Readiness::default`], [`shutdown::Shutdown::new`]
//!    with it, [`shutdown::Shutdown::listen_for_signals`], then [`admin::serve`] with the metrics
//!    registry. `/healthz` answers from here on; `/readyz` says 503 until step 6.
//! 5. **Caches:** start the shared reflectors (`gpu_operator_core::cache::stores::start`) and poll
//!    their driver in a task; keep standbys of their subscriptions (`Subscriptions::standby`).
//! 6. **Wait synced:** `Stores::wait_until_ready`, then [`admin::Readiness::set_ready`].
//! 7. **Lead in terms:** [`leader::run_terms`] with [`shutdown::Shutdown::signal`]: each term
//!    builds the Controllers afresh on resumed subscriptions (every cached object first), with
//!    `.graceful_shutdown_on(shutdown.signal())`. A lost Lease closes the fence, drops the term's
//!    Controllers and makes the process a candidate again (the Lease is taken back at once when
//!    it still names this process); a graceful end releases the Lease so a standby takes over at
//!    once. Then [`admin::AdminServers::join`].

pub mod admin;
pub mod config;
pub mod leader;
pub mod shutdown;
pub mod telemetry;
