//! One reflector per watched kind, shared by every reconciler: ClusterPolicies, our DaemonSets and
//! ServiceAccounts in the operator namespace (label-selected), and Nodes as metadata only (labels
//! and annotations), so the cache stays small at thousands of nodes.

use std::{future::Future, pin::Pin};

use futures::StreamExt as _;
use gpu_operator_api::ClusterPolicy;
use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Node, ServiceAccount},
};
use kube::{
    Api, Client,
    core::PartialObjectMeta,
    runtime::{
        WatchStreamExt as _,
        reflector::{self, ReflectHandle, Store},
        watcher,
    },
};

use crate::meta;

/// Read handles of the shared caches.
#[derive(Clone)]
pub struct Stores {
    /// Every ClusterPolicy.
    pub policies: Store<ClusterPolicy>,
    /// The DaemonSets we manage.
    pub daemonsets: Store<DaemonSet>,
    /// The ServiceAccounts we manage.
    pub service_accounts: Store<ServiceAccount>,
    /// Every Node, metadata only.
    pub nodes: Store<PartialObjectMeta<Node>>,
}

/// Change streams of the shared caches, to trigger controllers. Clone one per controller.
#[derive(Clone)]
pub struct Subscriptions {
    /// ClusterPolicy changes.
    pub policies: ReflectHandle<ClusterPolicy>,
    /// Managed DaemonSet changes.
    pub daemonsets: ReflectHandle<DaemonSet>,
    /// Managed ServiceAccount changes.
    pub service_accounts: ReflectHandle<ServiceAccount>,
    /// Node metadata changes.
    pub nodes: ReflectHandle<PartialObjectMeta<Node>>,
}

/// The future that runs every reflector; it must be polled for the caches to fill.
pub type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Buffer of each subscription; a slow controller holds back the reflector beyond this.
const BUFFER: usize = 1024;

/// Starts the shared reflectors (lazily: they run once the returned driver is polled).
pub fn start(
    client: &Client,
    namespace: &str,
) -> Result<(Stores, Subscriptions, Driver), NotShared> {
    let managed = watcher::Config::default().labels(&meta::managed_selector());

    let (policies, policies_writer) = reflector::store_shared(BUFFER);
    let policies_sub = subscribe(&policies_writer, "ClusterPolicy")?;
    let policies_stream = watcher(
        Api::<ClusterPolicy>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect_shared(policies_writer);

    let (daemonsets, ds_writer) = reflector::store_shared(BUFFER);
    let ds_sub = subscribe(&ds_writer, "DaemonSet")?;
    let ds_stream = watcher(
        Api::<DaemonSet>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect_shared(ds_writer);

    let (service_accounts, sa_writer) = reflector::store_shared(BUFFER);
    let sa_sub = subscribe(&sa_writer, "ServiceAccount")?;
    let sa_stream = watcher(
        Api::<ServiceAccount>::namespaced(client.clone(), namespace),
        managed,
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect_shared(sa_writer);

    let (nodes, nodes_writer) = reflector::store_shared(BUFFER);
    let nodes_sub = subscribe(&nodes_writer, "Node")?;
    let nodes_stream = watcher(
        Api::<PartialObjectMeta<Node>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(strip_managed_fields)
    .reflect_shared(nodes_writer);

    let driver = Box::pin(async move {
        let drain = |s: futures::stream::BoxStream<'static, ()>| s.for_each(|()| async {});
        futures::join!(
            drain(policies_stream.map(log_error("ClusterPolicy")).boxed()),
            drain(ds_stream.map(log_error("DaemonSet")).boxed()),
            drain(sa_stream.map(log_error("ServiceAccount")).boxed()),
            drain(nodes_stream.map(log_error("Node")).boxed()),
        );
    });
    let stores = Stores {
        policies,
        daemonsets,
        service_accounts,
        nodes,
    };
    let subscriptions = Subscriptions {
        policies: policies_sub,
        daemonsets: ds_sub,
        service_accounts: sa_sub,
        nodes: nodes_sub,
    };
    Ok((stores, subscriptions, driver))
}

/// Managed fields are the bulk of most objects' metadata and nothing here reads them; dropping
/// them keeps the caches small (a Node's metadata shrinks several times).
fn strip_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// A reflector writer that hands out no subscriptions (it was not made by `store_shared`).
#[derive(Debug, thiserror::Error)]
#[error("the {0} cache cannot be shared")]
pub struct NotShared(&'static str);

fn subscribe<K>(
    writer: &reflector::store::Writer<K>,
    kind: &'static str,
) -> Result<ReflectHandle<K>, NotShared>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    writer.subscribe().ok_or(NotShared(kind))
}

fn log_error<T>(kind: &'static str) -> impl Fn(Result<T, watcher::Error>) {
    move |event| {
        if let Err(error) = event {
            tracing::warn!(kind, %error, "watch error; retrying with backoff");
        }
    }
}

impl Stores {
    /// Waits until every cache has its first full list.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.policies.wait_until_ready().await?;
        self.daemonsets.wait_until_ready().await?;
        self.service_accounts.wait_until_ready().await?;
        self.nodes.wait_until_ready().await
    }
}
