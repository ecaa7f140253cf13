//! `gpu-operator run`: telemetry, client, probe and metrics servers, shared caches, leader
//! election, then every reconciler until SIGTERM, in leadership terms: a lost Lease stops the
//! reconcilers (writes are fenced at once) and the process tries to lead again in place.

use std::sync::Arc;

use anyhow::Context as _;
use futures::{FutureExt as _, future::BoxFuture};
use gpu_operator_api::conditions::operand;
use gpu_operator_core::{
    Context, cache::stores, contract::Operand, pipeline::controller, report::metrics::Metrics,
};
use gpu_operator_device_plugin::DevicePlugin;
use gpu_operator_driver::Driver;
use gpu_operator_gfd::GpuFeatureDiscovery;
use gpu_operator_process::{admin, config::RunArgs, leader, shutdown::Shutdown, telemetry};
use gpu_operator_toolkit::Toolkit;
use gpu_operator_validator_operand::Validation;

/// The operand conditions the status reconciler waits for: one per operand reconciler run below.
const OPERAND_CONDITIONS: &[&str] = &[
    operand::DEVICE_PLUGIN_READY,
    operand::VALIDATOR_READY,
    operand::DRIVER_READY,
    operand::TOOLKIT_READY,
    operand::DCGM_READY,
    operand::DCGM_EXPORTER_READY,
    operand::MIG_MANAGER_READY,
    operand::NODE_STATUS_EXPORTER_READY,
    operand::GFD_READY,
];

/// The reconciler of operand `O`, ready to be polled with the others.
fn operand<O: Operand>(
    ctx: &Arc<Context>,
    subs: &stores::Subscriptions,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> BoxFuture<'static, ()> {
    controller::run_operand::<O>(ctx.clone(), subs.clone(), shutdown).boxed()
}

/// Runs the operator until it is told to stop.
pub fn main(args: &RunArgs) -> anyhow::Result<()> {
    let namespace = args.namespace()?.to_owned();
    telemetry::init(&args.log_level, args.log_format)?;
    telemetry::log_build_info(&namespace, &args.identity());
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(run(args, namespace))
}

async fn run(args: &RunArgs, namespace: String) -> anyhow::Result<()> {
    let elector = if args.leader_elect {
        Some(leader::Elector::new(
            args.client().await?,
            args.lease_namespace()?,
            &args.leader_elect_lease_name,
            &args.lease_identity(),
            args.lease_params(),
        )?)
    } else {
        None
    };
    // Every request of the caches and reconcilers passes the fence: no write while not leading.
    let fence = elector
        .as_ref()
        .map_or_else(leader::Fence::always_open, leader::Elector::fence);
    let client = args.fenced_client(&fence).await?;
    let readiness = admin::Readiness::default();
    let shutdown = Shutdown::new(readiness.clone());
    shutdown.listen_for_signals()?;
    let metrics = Arc::new(Metrics::new());
    let servers = admin::serve(
        args.metrics_bind_address,
        args.health_probe_bind_address,
        metrics.clone(),
        readiness.clone(),
        &shutdown,
    )
    .await?;
    tracing::info!(metrics = ?servers.metrics_addr, probes = ?servers.probe_addr, "admin servers listening");

    let (stores, subs, driver) = stores::start(&client, &namespace);
    // The caches outlive leadership terms; the reconcilers' subscriptions are made per term.
    let standby = subs.standby();
    drop(subs);
    let caches = tokio::spawn(driver);
    tokio::select! {
        synced = stores.wait_until_ready() => synced.context("the caches stopped before they synced")?,
        () = shutdown.signal() => return Ok(()),
    }
    readiness.set_ready();
    tracing::info!("caches synced");

    let lead = |_term| {
        let ctx = Arc::new(Context::new(
            client.clone(),
            namespace.clone(),
            stores.clone(),
            metrics.clone(),
            Some(args.identity()),
        ));
        controllers(&ctx, &standby.resume(&stores), &shutdown)
    };
    match &elector {
        Some(elector) => leader::run_terms(elector, shutdown.signal(), lead).await?,
        None => lead(1).await,
    }
    shutdown.trigger();
    caches.abort();
    servers.join().await?;
    tracing::info!("stopped");
    Ok(())
}

/// Every reconciler, on subscriptions of their own, until the shutdown: one leadership term.
fn controllers(
    ctx: &Arc<Context>,
    subs: &stores::Subscriptions,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + use<> {
    let stop = || shutdown.signal();
    let controllers: Vec<BoxFuture<'static, ()>> = vec![
        gpu_operator_node_labels::controller(ctx.clone(), subs, stop()).boxed(),
        operand::<Validation>(ctx, subs, stop()),
        operand::<DevicePlugin>(ctx, subs, stop()),
        operand::<Driver>(ctx, subs, stop()),
        operand::<Toolkit>(ctx, subs, stop()),
        operand::<gpu_operator_dcgm_hostengine::Dcgm>(ctx, subs, stop()),
        operand::<gpu_operator_dcgm_exporter::DcgmExporter>(ctx, subs, stop()),
        operand::<gpu_operator_mig_manager::MigManager>(ctx, subs, stop()),
        operand::<gpu_operator_node_status_exporter::NodeStatusExporter>(ctx, subs, stop()),
        operand::<GpuFeatureDiscovery>(ctx, subs, stop()),
        operand::<gpu_operator_sandbox::Sandbox>(ctx, subs, stop()),
        gpu_operator_status::run_policy_status(
            ctx.clone(),
            subs.clone(),
            OPERAND_CONDITIONS,
            stop(),
        )
        .boxed(),
        gpu_operator_status::run_node_validation(ctx.clone(), subs.clone(), stop()).boxed(),
        gpu_operator_driver_upgrade::controller(ctx.clone(), subs.clone(), stop()).boxed(),
    ];
    // Every controller holds clones of the subscriptions it polls; `subs` itself is dropped by
    // the caller (an unpolled subscription would hold back the shared reflector for everyone).
    futures::future::join_all(controllers).map(|_| ())
}
