//! One reflector per watched kind, shared by every reconciler: ClusterPolicies; the objects we
//! manage (label-selected: DaemonSets, ServiceAccounts, Services, Roles and RoleBindings in the
//! operator namespace; ClusterRoles, ClusterRoleBindings and RuntimeClasses cluster-wide); every
//! ConfigMap of the operator namespace, ours and the ones users name in the ClusterPolicy
//! (`devicePlugin.config.name`, …); every Node as metadata only, watched as such and kept as
//! [`NodeMeta`] (name, labels, the validators' report), so the cache stays small at thousands of
//! nodes; the GPU nodes' container runtime, parsed as that one field; and the metadata of one
//! CustomResourceDefinition each for the Prometheus Operator's ServiceMonitor and PrometheusRule,
//! whose presence decides whether those can be created. NVIDIADrivers and GPUClusters are cached too,
//! where their CRD is installed, and the DRA kinds the GPUCluster writes (DeviceClasses,
//! ResourceClaimTemplates), watched at the served version of `resource.k8s.io` ([`DraApi`]: `v1`,
//! else `v1beta2`, each object stored as `v1`): where none is served, their cache stays empty and
//! ready ([`tolerate_missing`]), so the operator runs without them. Deployments and
//! ValidatingAdmissionPolicies (and their bindings) of ours are cached like the DaemonSets. The
//! ResourceSlices of NVIDIA's DRA driver (`spec.driver=gpu.nvidia.com`) are cached as
//! [`SliceSummary`] (node, pool, device counts), at the same version, empty where none is served.

use std::{fmt::Debug, future::Future, hash::Hash, pin::Pin, sync::Arc};

use futures::{Stream, StreamExt as _, stream::BoxStream};
use gpu_operator_api::{ClusterPolicy, GpuCluster, NvidiaDriver, labels};
use k8s_openapi::{
    api::{
        admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
        apps::v1::{DaemonSet, Deployment},
        core::v1::{ConfigMap, Service, ServiceAccount},
        node::v1::RuntimeClass,
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
        resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, Resource,
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::{
    cache::{
        change_stream::{self, Changes, Standby},
        facts_memo::{self, FactsMemo},
        node_meta::NodeMeta,
        node_runtime::NodeRuntime,
        resource_slice::{NVIDIA_GPU_DRIVER, SliceSummary},
    },
    dra_api::{self, DraApi, DraKind},
};

/// Name of the Prometheus Operator's ServiceMonitor CRD, whose presence the caches watch.
pub const SERVICE_MONITOR_CRD: &str = "servicemonitors.monitoring.coreos.com";
/// Name of the Prometheus Operator's PrometheusRule CRD, whose presence the caches watch.
pub const PROMETHEUS_RULE_CRD: &str = "prometheusrules.monitoring.coreos.com";

/// Label selector of every object the operator manages (`app.kubernetes.io/managed-by`), the
/// selector of the caches of our objects.
fn managed_selector() -> String {
    format!("{}={}", labels::APP_MANAGED_BY, labels::MANAGED_BY_VALUE)
}

/// Declares the cached kinds once: the caches, their change streams and the readiness wait.
macro_rules! kinds {
    (
        $($field:ident: $kind:ty),* ;
        $($(#[doc = $doc:literal])* $filtered:ident: $filtered_kind:ty = $source:ident),* $(,)?
    ) => {
        /// Read handles of the shared caches.
        #[derive(Clone)]
        pub struct Stores {
            $(#[doc = concat!("Cache of `", stringify!($kind), "`.")] pub $field: Store<$kind>,)*
            /// The cluster facts of the node caches, kept until their nodes change (see
            /// [`crate::cache::facts_memo`]).
            pub node_facts: Arc<FactsMemo>,
            /// Woken after every ClusterPolicy event reached the cache and the controllers, so a
            /// reconcile can tell when a newer spec overtook it.
            pub policy_events: Arc<Notify>,
            /// Woken after every NVIDIADriver event reached the cache and the controllers.
            pub nvidia_driver_events: Arc<Notify>,
            /// Woken after every GPUCluster event reached the cache and the controllers.
            pub gpu_cluster_events: Arc<Notify>,
        }

        /// Change streams of the shared caches, to trigger controllers.
        #[derive(Clone)]
        pub struct Subscriptions {
            $(#[doc = concat!("Changes of `", stringify!($kind), "`.")] pub $field: Changes<$kind>,)*
            $($(#[doc = $doc])* pub $filtered: Changes<$filtered_kind>,)*
        }

        /// The subscriptions kept while no reconciler runs (between two leadership terms),
        /// holding nothing back.
        pub struct StandbySubscriptions {
            $($field: Standby<$kind>,)*
            $($filtered: Standby<$filtered_kind>,)*
        }

        impl Subscriptions {
            /// Standbys of every change stream.
            pub fn standby(&self) -> StandbySubscriptions {
                StandbySubscriptions {
                    $($field: self.$field.standby(),)*
                    $($filtered: self.$filtered.standby(),)*
                }
            }
        }

        impl StandbySubscriptions {
            /// Live subscriptions that hand out every cached object first, then every change: a
            /// reconciler started on them sees the world as one started with the caches does.
            pub fn resume(&self, stores: &Stores) -> Subscriptions {
                Subscriptions {
                    $($field: self.$field.resume(&stores.$field),)*
                    $($filtered: self.$filtered.resume(&stores.$source),)*
                }
            }
        }

        impl Stores {
            /// Waits until every cache has its first full list.
            pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
                $(self.$field.wait_until_ready().await?;)*
                Ok(())
            }
        }
    };
}

kinds! {
    policies: ClusterPolicy,
    nvidia_drivers: NvidiaDriver,
    gpu_clusters: GpuCluster,
    nodes: NodeMeta,
    node_runtimes: NodeRuntime,
    daemonsets: DaemonSet,
    service_accounts: ServiceAccount,
    config_maps: ConfigMap,
    services: Service,
    roles: Role,
    role_bindings: RoleBinding,
    cluster_roles: ClusterRole,
    cluster_role_bindings: ClusterRoleBinding,
    runtime_classes: RuntimeClass,
    deployments: Deployment,
    admission_policies: ValidatingAdmissionPolicy,
    admission_policy_bindings: ValidatingAdmissionPolicyBinding,
    device_classes: DeviceClass,
    resource_claim_templates: ResourceClaimTemplate,
    resource_slices: SliceSummary,
    service_monitor_crds: PartialObjectMeta<CustomResourceDefinition>,
    prometheus_rule_crds: PartialObjectMeta<CustomResourceDefinition>;
    /// Nodes that are new, deleted, or whose labels or uid changed ([`NodeMeta::labels_changed`]).
    node_labels: NodeMeta = nodes,
    /// Nodes that are new, deleted, or whose GPU presence or validators' report changed
    /// ([`NodeMeta::report_changed`]).
    node_reports: NodeMeta = nodes,
    /// GPU nodes that are new, deleted, or run another container runtime
    /// ([`NodeRuntime::runtime_changed`]).
    runtime_changes: NodeRuntime = node_runtimes,
}

/// The future that runs every reflector; it must be polled for the caches to fill.
pub type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Buffer of each subscription; a slow controller holds back the reflector beyond this.
pub const BUFFER: usize = 1024;

/// Starts the shared reflectors (lazily: they run once the returned driver is polled); the DRA
/// kinds are watched at version `dra` of `resource.k8s.io`.
#[expect(clippy::too_many_lines, reason = "one reflector per kind, in order")]
pub fn start(client: &Client, namespace: &str, dra: DraApi) -> (Stores, Subscriptions, Driver) {
    let managed = watcher::Config::default().labels(&managed_selector());
    let everything = watcher::Config::default();
    let gpu_nodes = watcher::Config::default().labels(&format!("{}=true", labels::GPU_PRESENT));
    let (c, ns) = (client, namespace);
    let mut r = Reflectors::default();
    let node_facts = Arc::new(FactsMemo::default());
    let policy_events = Arc::new(Notify::new());
    let (policies, policies_sub, []) = r.reflect_tapped(
        Api::<ClusterPolicy>::all(c.clone()),
        &everything,
        strip_managed_fields,
        Tap::Notify(policy_events.clone()),
        [],
    );
    let nvidia_driver_events = Arc::new(Notify::new());
    let (nvidia_drivers, nvidia_drivers_sub, []) = r.reflect_tapped(
        Api::<NvidiaDriver>::all(c.clone()),
        &everything,
        strip_managed_fields,
        Tap::Notify(nvidia_driver_events.clone()),
        [],
    );
    let gpu_cluster_events = Arc::new(Notify::new());
    let (gpu_clusters, gpu_clusters_sub, []) = r.reflect_tapped(
        Api::<GpuCluster>::all(c.clone()),
        &everything,
        strip_managed_fields,
        Tap::Notify(gpu_cluster_events.clone()),
        [],
    );
    let (nodes, nodes_sub, [node_labels, node_reports]) = r.reflect_tapped(
        Api::<NodeMeta>::all(c.clone()),
        &everything,
        |_| {},
        Tap::Facts(node_facts.clone(), facts_memo::node_changed),
        [NodeMeta::labels_changed, NodeMeta::report_changed],
    );
    let (node_runtimes, node_runtimes_sub, [runtime_changes]) = r.reflect_tapped(
        Api::<NodeRuntime>::all(c.clone()),
        &gpu_nodes,
        |_| {},
        Tap::Facts(node_facts.clone(), facts_memo::runtime_changed),
        [NodeRuntime::runtime_changed],
    );
    let (daemonsets, daemonsets_sub) = r.reflect(
        Api::<DaemonSet>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (service_accounts, service_accounts_sub) = r.reflect(
        Api::<ServiceAccount>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (config_maps, config_maps_sub) = r.reflect(
        Api::<ConfigMap>::namespaced(c.clone(), ns),
        &everything,
        strip_managed_fields,
    );
    let (services, services_sub) = r.reflect(
        Api::<Service>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (roles, roles_sub) = r.reflect(
        Api::<Role>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (role_bindings, role_bindings_sub) = r.reflect(
        Api::<RoleBinding>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (cluster_roles, cluster_roles_sub) = r.reflect(
        Api::<ClusterRole>::all(c.clone()),
        &managed,
        strip_managed_fields,
    );
    let (cluster_role_bindings, cluster_role_bindings_sub) = r.reflect(
        Api::<ClusterRoleBinding>::all(c.clone()),
        &managed,
        strip_managed_fields,
    );
    let (runtime_classes, runtime_classes_sub) = r.reflect(
        Api::<RuntimeClass>::all(c.clone()),
        &managed,
        strip_managed_fields,
    );
    let (deployments, deployments_sub) = r.reflect(
        Api::<Deployment>::namespaced(c.clone(), ns),
        &managed,
        strip_managed_fields,
    );
    let (admission_policies, admission_policies_sub) = r.reflect(
        Api::<ValidatingAdmissionPolicy>::all(c.clone()),
        &managed,
        strip_managed_fields,
    );
    let (admission_policy_bindings, admission_policy_bindings_sub) = r.reflect(
        Api::<ValidatingAdmissionPolicyBinding>::all(c.clone()),
        &managed,
        strip_managed_fields,
    );
    // The DRA kinds, at version `dra`, read as empty where it is not served ([`tolerate_missing`]).
    let (device_classes, device_classes_sub) = r.reflect_dra(
        dra,
        (
            Api::<DeviceClass>::all(c.clone()),
            Api::<<DeviceClass as DraKind>::V1beta2>::all(c.clone()),
        ),
        &managed,
        strip_managed_fields,
    );
    let (resource_claim_templates, resource_claim_templates_sub) = r.reflect_dra(
        dra,
        (
            Api::<ResourceClaimTemplate>::namespaced(c.clone(), ns),
            Api::<<ResourceClaimTemplate as DraKind>::V1beta2>::namespaced(c.clone(), ns),
        ),
        &managed,
        strip_managed_fields,
    );
    let nvidia_slices =
        watcher::Config::default().fields(&format!("spec.driver={NVIDIA_GPU_DRIVER}"));
    let (resource_slices, resource_slices_sub) = r.reflect_dra(
        dra,
        (
            Api::<SliceSummary>::all(c.clone()),
            Api::<<ResourceSlice as DraKind>::V1beta2>::all(c.clone()),
        ),
        &nvidia_slices,
        |_| {},
    );
    let (service_monitor_crds, service_monitor_crds_sub) = r.crd_metadata(c, SERVICE_MONITOR_CRD);
    let (prometheus_rule_crds, prometheus_rule_crds_sub) = r.crd_metadata(c, PROMETHEUS_RULE_CRD);

    let driver = Box::pin(futures::stream::select_all(r.streams).for_each(|()| async {}));
    let stores = Stores {
        policies,
        nvidia_drivers,
        gpu_clusters,
        nodes,
        node_runtimes,
        daemonsets,
        service_accounts,
        config_maps,
        services,
        roles,
        role_bindings,
        cluster_roles,
        cluster_role_bindings,
        runtime_classes,
        deployments,
        admission_policies,
        admission_policy_bindings,
        device_classes,
        resource_claim_templates,
        resource_slices,
        service_monitor_crds,
        prometheus_rule_crds,
        node_facts,
        policy_events,
        nvidia_driver_events,
        gpu_cluster_events,
    };
    let subscriptions = Subscriptions {
        policies: policies_sub,
        nvidia_drivers: nvidia_drivers_sub,
        gpu_clusters: gpu_clusters_sub,
        nodes: nodes_sub,
        node_runtimes: node_runtimes_sub,
        daemonsets: daemonsets_sub,
        service_accounts: service_accounts_sub,
        config_maps: config_maps_sub,
        services: services_sub,
        roles: roles_sub,
        role_bindings: role_bindings_sub,
        cluster_roles: cluster_roles_sub,
        cluster_role_bindings: cluster_role_bindings_sub,
        runtime_classes: runtime_classes_sub,
        deployments: deployments_sub,
        admission_policies: admission_policies_sub,
        admission_policy_bindings: admission_policy_bindings_sub,
        device_classes: device_classes_sub,
        resource_claim_templates: resource_claim_templates_sub,
        resource_slices: resource_slices_sub,
        service_monitor_crds: service_monitor_crds_sub,
        prometheus_rule_crds: prometheus_rule_crds_sub,
        node_labels,
        node_reports,
        runtime_changes,
    };
    (stores, subscriptions, driver)
}

/// Builds shared reflectors, collecting the streams that drive them.
#[derive(Default)]
struct Reflectors {
    streams: Vec<BoxStream<'static, ()>>,
}

impl Reflectors {
    /// The metadata of the one CustomResourceDefinition `name`.
    fn crd_metadata(
        &mut self,
        client: &Client,
        name: &str,
    ) -> (
        Store<PartialObjectMeta<CustomResourceDefinition>>,
        Changes<PartialObjectMeta<CustomResourceDefinition>>,
    ) {
        self.reflect(
            Api::<PartialObjectMeta<CustomResourceDefinition>>::all(client.clone()),
            &watcher::Config::default().fields(&format!("metadata.name={name}")),
            strip_managed_fields,
        )
    }

    fn reflect<K>(
        &mut self,
        api: Api<K>,
        config: &watcher::Config,
        modify: fn(&mut K),
    ) -> (Store<K>, Changes<K>)
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Default,
    {
        let (store, changes, []) = self.reflect_tapped(api, config, modify, Tap::None, []);
        (store, changes)
    }

    /// Reflects a DRA kind at version `dra`: through `v1` (`K`, its type or a projection of it)
    /// or `v1beta2` (`S`, each object read as `K`), whichever `dra` says.
    fn reflect_dra<K, S>(
        &mut self,
        dra: DraApi,
        (v1, v1beta2): (Api<K>, Api<S>),
        config: &watcher::Config,
        modify: fn(&mut K),
    ) -> (Store<K>, Changes<K>)
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        S: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + serde::Serialize,
        S: Send + Sync + 'static,
    {
        match dra {
            DraApi::V1 => self.reflect(v1, config, modify),
            DraApi::V1beta2 => {
                let events = served_events(v1beta2, config);
                let (store, changes, []) = self.reflect_events(events, modify, Tap::None, []);
                (store, changes)
            }
        }
    }

    /// Like `reflect`, tells `tap` about each event (see [`Tap`]), and adds one filtered
    /// subscription per test of `filters` (see [`change_stream::Changed`]).
    fn reflect_tapped<K, const N: usize>(
        &mut self,
        api: Api<K>,
        config: &watcher::Config,
        modify: fn(&mut K),
        tap: Tap<K>,
        filters: [change_stream::Changed<K>; N],
    ) -> (Store<K>, Changes<K>, [Changes<K>; N])
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Default,
    {
        self.reflect_events(watcher(api, config.clone()), modify, tap, filters)
    }

    /// Like `reflect_tapped`, of the watch events `events`.
    fn reflect_events<K, const N: usize>(
        &mut self,
        events: impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
        modify: fn(&mut K),
        tap: Tap<K>,
        filters: [change_stream::Changed<K>; N],
    ) -> (Store<K>, Changes<K>, [Changes<K>; N])
    where
        K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::DynamicType: Eq + Hash + Clone + Default,
    {
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let (store, writer) = reflector::store();
        let tap = Arc::new(tap.start());
        let (before, after, cache) = (tap.clone(), tap, store.clone());
        let events = events
            .default_backoff()
            .flat_map(|event| futures::stream::iter(tolerate_missing(event)))
            .modify(modify)
            .inspect(move |event| {
                if let Ok(event) = event {
                    before.before_apply(event, &cache);
                }
            });
        let (subscription, filtered, events) =
            change_stream::reflect(events, writer, BUFFER, filters);
        let stream = events
            .inspect(move |_| after.after_dispatch())
            .map(move |event| {
                if let Err(error) = event {
                    tracing::warn!(kind, %error, "watch error; retrying with backoff");
                }
            })
            .boxed();
        self.streams.push(stream);
        (store, subscription, filtered)
    }
}

/// The watch events of `api` (a DRA kind at a beta version) with each object read as `K` (see
/// [`dra_api::from_served`]); an object that does not read is dropped with a watch error.
fn served_events<K, S>(
    api: Api<S>,
    config: &watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
    S: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + serde::Serialize,
    S: Send + Sync + 'static,
{
    watcher(api, config.clone()).map(|event| {
        let read = |object: S| {
            dra_api::read_served(&object).map_err(|error| {
                tracing::warn!(%error, "a DRA object of the served version does not read as v1");
                watcher::Error::WatchFailed(kube::Error::SerdeError(error))
            })
        };
        Ok(match event? {
            watcher::Event::Apply(object) => watcher::Event::Apply(read(object)?),
            watcher::Event::Delete(object) => watcher::Event::Delete(read(object)?),
            watcher::Event::InitApply(object) => watcher::Event::InitApply(read(object)?),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
        })
    })
}

/// A watch event as the reflector takes it, except that a list or watch the API server answers
/// 404 (the kind's CRD is not installed: NVIDIADriver where only the ClusterPolicy CRD is) reads
/// as an empty list: the cache is empty and ready instead of never synced, and the watcher keeps
/// retrying with backoff, so a CRD installed later is listed then.
fn tolerate_missing<K>(
    event: Result<watcher::Event<K>, watcher::Error>,
) -> Vec<Result<watcher::Event<K>, watcher::Error>> {
    match event {
        Err(error) if resource_missing(&error) => {
            tracing::debug!(%error, "the watched kind is not served; cached as empty");
            vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)]
        }
        other => vec![other],
    }
}

/// Whether the API server answered a list or watch with 404: the resource is not served.
fn resource_missing(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(response))
        | watcher::Error::WatchStartFailed(kube::Error::Api(response)) => response.code == 404,
        _ => false,
    }
}

/// What a reflector reports besides filling its cache.
enum Tap<K> {
    /// Nothing.
    None,
    /// Marks the events that change what the cluster facts read: when `changed(old, new)` says
    /// so of an updated object, and for every object added or removed.
    Facts(Arc<FactsMemo>, fn(&K, &K) -> bool),
    /// Wakes the waiters after every event.
    Notify(Arc<Notify>),
}

/// A [`Tap`] at work.
enum Tapping<K> {
    None,
    Facts(
        Arc<FactsMemo>,
        crate::cache::facts_memo::Marker,
        fn(&K, &K) -> bool,
    ),
    Notify(Arc<Notify>),
}

impl<K> Tap<K> {
    fn start(self) -> Tapping<K> {
        match self {
            Self::None => Tapping::None,
            Self::Facts(memo, changed) => Tapping::Facts(memo.clone(), memo.marker(), changed),
            Self::Notify(notify) => Tapping::Notify(notify),
        }
    }
}

impl<K> Tapping<K>
where
    K: Resource + Clone,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    /// Called with each event before the reflector applies it to `cache`.
    fn before_apply(&self, event: &watcher::Event<K>, cache: &Store<K>) {
        let Self::Facts(_, marker, changed) = self else {
            return;
        };
        let marks = match event {
            watcher::Event::Apply(new) => cache
                .get(&ObjectRef::from_obj(new))
                .is_none_or(|old| changed(&old, new)),
            watcher::Event::Delete(_)
            | watcher::Event::Init
            | watcher::Event::InitApply(_)
            | watcher::Event::InitDone => true,
        };
        if marks {
            marker.mark();
        }
    }

    /// Called after the reflector applied the event and passed it to the subscribers.
    fn after_dispatch(&self) {
        match self {
            Self::None => {}
            Self::Facts(memo, marker, _) => memo.settle(marker),
            Self::Notify(notify) => notify.notify_waiters(),
        }
    }
}

/// Managed fields are the bulk of most objects' metadata and nothing here reads them; dropping
/// them keeps the caches small (a Node's metadata shrinks several times).
fn strip_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests;
