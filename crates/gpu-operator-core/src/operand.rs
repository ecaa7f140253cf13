//! The reconcile pipeline every operand shares: validate → render → apply → status. An operand
//! crate supplies the two pure steps through [`Operand`]; this module does the I/O.

use std::{
    collections::BTreeSet,
    sync::Arc,
    time::{Duration, Instant},
};

use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{Pod, ServiceAccount},
    },
    apimachinery::pkg::apis::meta::v1::ObjectMeta,
};
use kube::{
    Api, Resource, ResourceExt as _,
    runtime::{
        controller::Action,
        events::{Event, EventType},
        reflector::{ObjectRef, Store},
    },
};

use crate::{
    Context, Error, active,
    apply::{self, Outcome},
    meta, problems, readiness,
    status_write::{self, Desired},
};

/// How many not-ready nodes a condition names.
pub const PROBLEM_NODES: usize = 5;
/// Safety resync of a converged operand.
const RESYNC: Duration = Duration::from_secs(3600);

/// One operand: its names and its pure validate and render steps.
pub trait Operand: Send + Sync + 'static {
    /// Reconciler name: field manager suffix, `app.kubernetes.io/component`, metric label.
    const NAME: &'static str;
    /// The ClusterPolicy condition this reconciler owns, such as `DevicePluginReady`.
    const CONDITION: &'static str;
    /// The ClusterPolicy section, such as `devicePlugin`, for messages.
    const SECTION: &'static str;
    /// What validation produces for rendering.
    type Input: Send + Sync;

    /// Checks the spec and resolves what rendering needs; `Ok(None)` when the operand is
    /// disabled. `image_env` looks up the operator's image environment fallbacks.
    fn validate(
        spec: &ClusterPolicySpec,
        image_env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self::Input>, Error>;

    /// The objects the operand needs, without namespace or owner (added on apply).
    fn render(input: &Self::Input) -> Children;
}

/// Every kind of object an operand may render. Destructured exhaustively on apply, so a new kind
/// cannot be forgotten.
#[derive(Clone, Debug, Default)]
pub struct Children {
    /// ServiceAccounts.
    pub service_accounts: Vec<ServiceAccount>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
}

/// Reconciles operand `O` for `policy`.
pub async fn reconcile<O: Operand>(
    policy: Arc<ClusterPolicy>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_once::<O>(&policy, &ctx).await;
    ctx.metrics.observe(
        O::NAME,
        started.elapsed(),
        result.as_ref().err().map(Error::category),
    );
    if let Err(error) = &result {
        let desired = Desired::not_ok(O::CONDITION, error.category(), error.to_string());
        // Report the failure once (condition + Event); repeating the same failure writes nothing.
        if status_write::write(&ctx, &policy, O::NAME, &desired)
            .await
            .unwrap_or(false)
        {
            publish(
                &ctx,
                &policy,
                EventType::Warning,
                error.category(),
                &desired.message,
            )
            .await;
        }
    }
    result
}

/// The decision table for errors: a spec problem waits for a change, the rest retry.
pub fn error_policy<O: Operand>(
    _policy: Arc<ClusterPolicy>,
    error: &Error,
    _ctx: Arc<Context>,
) -> Action {
    if error.is_transient() {
        Action::requeue(Duration::from_secs(10))
    } else {
        Action::await_change()
    }
}

async fn reconcile_once<O: Operand>(
    policy: &ClusterPolicy,
    ctx: &Context,
) -> Result<Action, Error> {
    if !active::is_active(policy, &ctx.stores.policies.state()) {
        return Ok(Action::await_change());
    }
    let image_env = |name: &str| ctx.image_env(name).map(str::to_owned);
    let facts = ctx.facts();
    let (children, state) = match O::validate(&policy.spec, &image_env)? {
        None => (
            Children::default(),
            Some(Desired::ok(
                O::CONDITION,
                "Disabled",
                format!("{}.enabled is false: nothing deployed", O::SECTION),
            )),
        ),
        Some(_) if facts.gpu_nodes == 0 => (
            Children::default(),
            Some(Desired::ok(
                O::CONDITION,
                "NoGPUNodes",
                "no GPU nodes: nothing deployed yet",
            )),
        ),
        Some(input) => (O::render(&input), None),
    };
    let written = apply_children::<O>(ctx, policy, &children).await?;
    let desired = match state {
        Some(state) => state,
        None => rollout_condition::<O>(ctx, &children).await?,
    };
    if written {
        publish(
            ctx,
            policy,
            EventType::Normal,
            "Applied",
            &format!(
                "{}: applied {} object(s)",
                O::SECTION,
                written_count(&children)
            ),
        )
        .await;
    }
    status_write::write(ctx, policy, O::NAME, &desired).await?;
    Ok(Action::requeue(RESYNC))
}

fn written_count(children: &Children) -> usize {
    children.service_accounts.len() + children.daemonsets.len()
}

/// Applies what changed, prunes what is no longer rendered; true if anything was written.
async fn apply_children<O: Operand>(
    ctx: &Context,
    policy: &ClusterPolicy,
    children: &Children,
) -> Result<bool, Error> {
    let Children {
        service_accounts,
        daemonsets,
    } = children;
    let mut written = false;
    written |=
        apply_kind::<O, _>(ctx, policy, service_accounts, &ctx.stores.service_accounts).await?;
    written |= apply_kind::<O, _>(ctx, policy, daemonsets, &ctx.stores.daemonsets).await?;
    Ok(written)
}

async fn apply_kind<O, K>(
    ctx: &Context,
    policy: &ClusterPolicy,
    objects: &[K],
    cache: &Store<K>,
) -> Result<bool, Error>
where
    O: Operand,
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let mut written = false;
    let mut keep = BTreeSet::new();
    for object in objects {
        let mut object = object.clone();
        finish(object.meta_mut(), policy, &ctx.namespace);
        let name = object.name_any();
        let live = cache.get(&ObjectRef::new(&name).within(&ctx.namespace));
        written |= apply::apply(&api, &object, live.as_deref(), O::NAME).await? == Outcome::Written;
        keep.insert(name);
    }
    for stale in cache
        .state()
        .iter()
        .filter(|o| o.labels().get(meta::COMPONENT_LABEL).map(String::as_str) == Some(O::NAME))
    {
        if !keep.contains(&stale.name_any()) {
            apply::delete(&api, &stale.name_any()).await?;
            written = true;
        }
    }
    Ok(written)
}

/// Namespace and controller owner reference of a rendered object.
fn finish(meta: &mut ObjectMeta, policy: &ClusterPolicy, namespace: &str) {
    meta.namespace = Some(namespace.to_owned());
    meta.owner_references = meta::owner_reference(policy).map(|owner| vec![owner]);
}

/// The operand's condition from its DaemonSets in the cache.
async fn rollout_condition<O: Operand>(
    ctx: &Context,
    children: &Children,
) -> Result<Desired, Error> {
    let (mut desired, mut ready, mut problems) = (0, 0, Vec::new());
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let nodes = ctx.stores.nodes.state();
    for ds in &children.daemonsets {
        let Some(live) = ctx
            .stores
            .daemonsets
            .get(&ObjectRef::new(&ds.name_any()).within(&ctx.namespace))
        else {
            return Ok(Desired::not_ok(
                O::CONDITION,
                "RollingOut",
                format!("DaemonSet {} is being created", ds.name_any()),
            ));
        };
        let rollout = readiness::rollout(&live);
        desired += rollout.desired;
        ready += rollout.ready;
        if !rollout.is_ready && problems.len() < PROBLEM_NODES {
            let limit = PROBLEM_NODES - problems.len();
            let found =
                problems::problem_nodes(&pods, &live, &nodes, limit, &ctx.problem_scans).await?;
            problems.extend(found);
        }
    }
    let counts = format!("ready on {ready}/{desired} GPU nodes");
    if problems.is_empty() && ready >= desired {
        return Ok(Desired::ok(O::CONDITION, "Ready", counts));
    }
    let named: Vec<String> = problems
        .iter()
        .map(|p| format!("{}: {}", p.node, p.reason))
        .collect();
    let detail = if named.is_empty() {
        "rolling out".to_owned()
    } else {
        format!("not ready on {}", named.join("; "))
    };
    Ok(Desired::not_ok(
        O::CONDITION,
        "NotReady",
        format!("{counts}; {detail}"),
    ))
}

async fn publish(
    ctx: &Context,
    policy: &ClusterPolicy,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(crate::conditions::truncate(note, 1024)),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &policy.object_ref(&())).await {
        tracing::warn!(%error, reason, "could not publish an Event");
    }
}
