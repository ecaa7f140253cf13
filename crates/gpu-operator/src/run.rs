//! `gpu-operator run`: telemetry, client, probe and metrics servers, shared caches, leader
//! election, then every reconciler until SIGTERM, in leadership terms: a lost Lease stops the
//! reconcilers (writes are fenced at once) and the process tries to lead again in place.

use std::sync::Arc;

use anyhow::Context as _;
use futures::{FutureExt as _, future::BoxFuture};
use gpu_operator_core::{
    Context, cache::stores, contract::Operand, pipeline::controller, report::metrics::Metrics,
};
use gpu_operator_operands::VisitAny;
use gpu_operator_process::{
    admin,
    config::RunArgs,
    leader,
    shutdown::{GRACE, Shutdown},
    telemetry,
};

/// The reconcilers of the registry's operands (of every owner kind), ready to be polled with the
/// others.
struct OperandReconcilers<'a> {
    ctx: &'a Arc<Context>,
    subs: &'a stores::Subscriptions,
    shutdown: &'a Shutdown,
    reconcilers: Vec<BoxFuture<'static, ()>>,
}

impl VisitAny for OperandReconcilers<'_> {
    fn operand<O: Operand>(&mut self) {
        let reconciler = controller::run_operand::<O>(
            self.ctx.clone(),
            self.subs.clone(),
            self.shutdown.signal(),
        );
        self.reconcilers.push(reconciler.boxed());
    }
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

    // The DRA caches watch the version of `resource.k8s.io` the server serves.
    let server = crate::server_facts::discover(&client).await;
    let (stores, subs, driver) = stores::start(&client, &namespace, server.dra_api_in_use());
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
        let ctx = Arc::new(
            Context::new(
                client.clone(),
                namespace.clone(),
                stores.clone(),
                metrics.clone(),
                Some(args.identity()),
                &gpu_operator_operands::image_vars(),
            )
            .with_server(server.clone()),
        );
        let work = controllers(&ctx, &standby.resume(&stores), &shutdown);
        let shutdown = shutdown.clone();
        // A reconcile waiting on the API server must not hold the exit (see `Shutdown::bounded`).
        async move {
            shutdown.bounded(work, GRACE).await;
        }
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

/// The conditions the GPUCluster's overall status sums up: its operands' (from the registry) and
/// `DRAResourcesPublished` (every DRA node publishes its GPUs as ResourceSlices).
static GPU_CLUSTER_CONDITIONS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| {
        let mut conditions = gpu_operator_operands::gpu_cluster_ready_conditions();
        conditions.push(gpu_operator_api::conditions::gpu_cluster::DRA_RESOURCES_PUBLISHED);
        conditions
    });

/// Every reconciler, on subscriptions of their own, until the shutdown: one leadership term.
fn controllers(
    ctx: &Arc<Context>,
    subs: &stores::Subscriptions,
    shutdown: &Shutdown,
) -> impl Future<Output = ()> + use<> {
    let stop = || shutdown.signal();
    let mut operands = OperandReconcilers {
        ctx,
        subs,
        shutdown,
        reconcilers: Vec::new(),
    };
    gpu_operator_operands::visit_every_kind(&mut operands);
    let mut controllers: Vec<BoxFuture<'static, ()>> =
        vec![gpu_operator_node_labels::controller(ctx.clone(), subs, stop()).boxed()];
    controllers.extend(operands.reconcilers);
    controllers.extend([
        gpu_operator_status::run_policy_status(
            ctx.clone(),
            subs.clone(),
            gpu_operator_operands::ready_conditions(),
            stop(),
        )
        .boxed(),
        gpu_operator_status::run_nvidia_driver_status(ctx.clone(), subs.clone(), stop()).boxed(),
        gpu_operator_status::run_gpu_cluster_status(
            ctx.clone(),
            subs.clone(),
            &GPU_CLUSTER_CONDITIONS,
            stop(),
        )
        .boxed(),
        gpu_operator_status::run_node_validation(ctx.clone(), subs.clone(), stop()).boxed(),
        gpu_operator_status::run_dra_resources(ctx.clone(), subs.clone(), stop()).boxed(),
        gpu_operator_driver_upgrade::controller(ctx.clone(), subs.clone(), stop()).boxed(),
    ]);
    // Every controller holds clones of the subscriptions it polls; `subs` itself is dropped by
    // the caller (an unpolled subscription would hold back the shared reflector for everyone).
    futures::future::join_all(controllers).map(|_| ())
}
