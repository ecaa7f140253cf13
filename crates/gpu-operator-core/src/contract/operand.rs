//! The [`Operand`] trait: an operand's names, the image variables it reads from the operator's
//! environment ([`ImageEnv`]), and its pure validate and render steps.

use k8s_openapi::api::{apps::v1::DaemonSet, core::v1::Pod};

use crate::{
    Error,
    cache::stores::Stores,
    contract::{Children, Cluster, Owner, Warning},
};

/// An operator environment variable that gives an operand's default image when its section
/// names none (NVIDIA's `DEVICE_PLUGIN_IMAGE`, …), and the chart values section it is set from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageEnv {
    /// The variable, such as `DEVICE_PLUGIN_IMAGE`.
    pub var: &'static str,
    /// The chart's values section the operator Deployment sets it from (`devicePlugin`,
    /// `driver.manager`), or `None` when the chart does not set it.
    pub chart_values: Option<&'static str>,
}

/// What an operand that deploys nothing states in its condition (see [`Operand::summary`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Whether the condition is `True`.
    pub ready: bool,
    /// Its PascalCase reason.
    pub reason: &'static str,
    /// Its message.
    pub message: String,
}

/// One operand: its names and its pure validate and render steps.
pub trait Operand: Send + Sync + 'static {
    /// Reconciler name: field manager suffix, `app.kubernetes.io/component`, metric label.
    const NAME: &'static str;
    /// The owner's condition this reconciler writes, such as `DevicePluginReady`.
    const CONDITION: &'static str;
    /// The owner's spec section, such as `devicePlugin`, for messages.
    const SECTION: &'static str;
    /// The custom resource that owns the operand and whose spec it validates.
    type Owner: Owner;
    /// What validation produces for rendering.
    type Input: Send + Sync;
    /// Whether the overall `Ready` waits for [`Operand::CONDITION`]. `true` by default; an
    /// operand that only reports (the sandbox settings this operator does not deploy) says
    /// `false`.
    const IN_OVERALL_READY: bool = true;
    /// The operator environment variables that give the default images of this operand's
    /// sections, read at start-up into [`crate::Context::image_env`]. None by default.
    const IMAGES: &'static [ImageEnv] = &[];

    /// Checks the spec and resolves what rendering needs; `Ok(None)` when the operand is
    /// disabled. `cluster` tells what the operator knows besides the spec.
    fn validate(
        spec: &<Self::Owner as Owner>::Spec,
        cluster: &Cluster<'_>,
    ) -> Result<Option<Self::Input>, Error>;

    /// Why the operand is disabled when [`Operand::validate`] says so, in a sentence for its
    /// condition; `None` (the default) says `<section>.enabled is false`.
    fn disabled_because(
        _spec: &<Self::Owner as Owner>::Spec,
        _cluster: &Cluster<'_>,
    ) -> Option<String> {
        None
    }

    /// Whether another owner takes over what this operand's DaemonSets run, so the DaemonSets it
    /// prunes now leave their pods running (orphan propagation) until the other owner's upgrade
    /// replaces them — the driver moving between the ClusterPolicy and NVIDIADrivers, whose new
    /// pods wait for the old (one driver pod per node). `false` (the default): a pruned
    /// DaemonSet's pods go with it.
    fn hands_over(_spec: &<Self::Owner as Owner>::Spec, _cluster: &Cluster<'_>) -> bool {
        false
    }

    /// The objects the operand needs, without namespace or owner (added on apply).
    fn render(input: &Self::Input) -> Children;

    /// Objects kept while the operand is disabled, such as the RuntimeClasses NVIDIA creates
    /// whatever the toolkit's switch says; nothing by default.
    fn render_disabled(_spec: &<Self::Owner as Owner>::Spec, _cluster: &Cluster<'_>) -> Children {
        Children::default()
    }

    /// GPU nodes the rendered objects cannot serve, said in a sentence (such as nodes without
    /// the labels an image depends on); the condition is then not ready. `None` by default.
    fn unserved(_input: &Self::Input) -> Option<String> {
        None
    }

    /// What is wrong but does not stop the rollout (a setting that points at nothing, say): each
    /// shows in the condition and once as a Warning Event. None by default.
    fn warnings(_input: &Self::Input) -> Vec<Warning> {
        Vec::new()
    }

    /// Warnings about which nodes the operand serves that depend on the other owners and the
    /// nodes, read from the caches `stores` (no client): NVIDIADrivers selecting the same nodes,
    /// GPU nodes no NVIDIADriver serves. Each shows in the condition and once as a Warning
    /// Event, as [`Operand::warnings`]. None by default.
    fn placement_warnings(
        _spec: &<Self::Owner as Owner>::Spec,
        _cluster: &Cluster<'_>,
        _stores: &Stores,
    ) -> Vec<Warning> {
        Vec::new()
    }

    /// For an operand that deploys nothing of its own and states what the others do (the sandbox
    /// workloads: which GPU nodes run which stack): its condition, instead of a rollout's. Its
    /// [`Operand::warnings`] still apply. `None` by default.
    fn summary(_input: &Self::Input) -> Option<Summary> {
        None
    }

    /// Whether the operand may render ServiceMonitors or PrometheusRules, so its stale ones are
    /// looked for even when it renders none.
    const SERVICE_MONITORS: bool = false;

    /// For an `OnDelete` DaemonSet: whether its live pod of an older revision still runs what the
    /// DaemonSet asks for, so it needs no replacement and is not reported as an old revision.
    /// `None` (the default): every pod of an older revision is outdated.
    const POD_IN_SYNC: Option<fn(&DaemonSet, &Pod) -> bool> = None;
}
