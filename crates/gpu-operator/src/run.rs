//! `gpu-operator run`: telemetry, client, probe and metrics servers, shared caches, leader
//! election, then every reconciler until SIGTERM or the loss of the lease.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use futures::{FutureExt as _, future::BoxFuture};
use gpu_operator_api::conditions::operand;
use gpu_operator_core::{Context, controller, metrics::Metrics, operand::Operand, stores};
use gpu_operator_device_plugin::DevicePlugin;
use gpu_operator_driver::Driver;
use gpu_operator_gfd::GpuFeatureDiscovery;
use gpu_operator_runtime::{admin, config::RunArgs, leader, shutdown::Shutdown, telemetry};
use gpu_operator_toolkit::Toolkit;
use gpu_operator_validation::Validation;

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
    let client = args.client().await?;
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
    let caches = tokio::spawn(driver);
    tokio::select! {
        synced = stores.wait_until_ready() => synced.context("the caches stopped before they synced")?,
        () = shutdown.signal() => return Ok(()),
    }
    readiness.set_ready();
    tracing::info!("caches synced");

    let leadership = if args.leader_elect {
        let identity = args.lease_identity();
        let acquire = leader::acquire(
            client.clone(),
            args.lease_namespace()?,
            &args.leader_elect_lease_name,
            &identity,
            args.lease_params(),
        );
        tokio::select! {
            leadership = acquire => Some(leadership?),
            () = shutdown.signal() => return Ok(()),
        }
    } else {
        None
    };

    let ctx = Arc::new(Context::new(
        client,
        namespace,
        stores,
        metrics,
        Some(args.identity()),
    ));
    let stop = || shutdown.signal();
    let controllers: Vec<BoxFuture<'static, ()>> = vec![
        gpu_operator_node_labels::controller(ctx.clone(), &subs, stop()).boxed(),
        operand::<Validation>(&ctx, &subs, stop()),
        operand::<DevicePlugin>(&ctx, &subs, stop()),
        operand::<Driver>(&ctx, &subs, stop()),
        operand::<Toolkit>(&ctx, &subs, stop()),
        operand::<gpu_operator_dcgm::Dcgm>(&ctx, &subs, stop()),
        operand::<gpu_operator_dcgm_exporter::DcgmExporter>(&ctx, &subs, stop()),
        operand::<gpu_operator_mig_manager::MigManager>(&ctx, &subs, stop()),
        operand::<gpu_operator_node_status_exporter::NodeStatusExporter>(&ctx, &subs, stop()),
        operand::<GpuFeatureDiscovery>(&ctx, &subs, stop()),
        operand::<gpu_operator_sandbox::Sandbox>(&ctx, &subs, stop()),
        controller::run_status(ctx.clone(), subs.clone(), OPERAND_CONDITIONS, stop()).boxed(),
        controller::run_node_validation(ctx.clone(), subs.clone(), stop()).boxed(),
        gpu_operator_driver_upgrade::controller(ctx.clone(), subs.clone(), stop()).boxed(),
    ];
    let controllers = futures::future::join_all(controllers);
    // Every controller holds clones of the subscriptions it polls. An unpolled subscription would
    // fill its buffer and stall the shared reflector for everyone, so the originals go now.
    drop(subs);
    let lost = match &leadership {
        Some(leadership) => leadership.lost().boxed(),
        None => futures::future::pending().boxed(),
    };
    let outcome = tokio::select! {
        _ = controllers => None,
        reason = lost => Some(reason),
    };
    shutdown.trigger();
    caches.abort();
    if let Some(reason) = outcome {
        bail!("lost the leader-election lease ({reason:?}); exiting so no second leader writes");
    }
    if let Some(leadership) = leadership {
        leadership.release().await;
    }
    servers.join().await?;
    tracing::info!("stopped");
    Ok(())
}
