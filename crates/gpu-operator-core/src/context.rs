//! The one context every reconciler gets: client, operator namespace, shared caches, metrics,
//! the Event recorder and the image defaults from the operator's environment.

use std::{collections::BTreeMap, sync::Arc};

use kube::runtime::events::{Recorder, Reporter};

use crate::{
    cache::{
        facts::{ClusterFacts, LiveDaemonSet},
        server_facts::ServerFacts,
        stores::Stores,
    },
    pipeline::write_gate::WriteGate,
    report::{metrics::Metrics, one_off_events::OneOffEvents, problems::ScanClock},
};

/// Shared state of all reconcilers. Built once in `main`.
pub struct Context {
    /// API client.
    pub client: kube::Client,
    /// Namespace of the operator and its operands (`OPERATOR_NAMESPACE`).
    pub namespace: String,
    /// The shared caches.
    pub stores: Stores,
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    /// Event recorder (reporting controller `gpu-operator`, instance = pod name).
    pub recorder: Recorder,
    /// The same reporter's Events about one-off happenings, such as a node's upgrade steps.
    pub one_off_events: OneOffEvents,
    /// Image fallbacks from the environment, by variable name (`DEVICE_PLUGIN_IMAGE`, …).
    pub image_env: BTreeMap<String, String>,
    /// Rate limit of the full pod scans behind the operand conditions' problem nodes.
    pub problem_scans: ScanClock,
    /// Which status changes are written now and which wait (see [`crate::pipeline::write_gate`]).
    pub status_gate: WriteGate,
    /// The warnings already published as Events (see [`crate::report::warned`]).
    pub warned: crate::report::warned::Warned,
    /// Which reconcilers applied what, for the sweep of leftovers (see
    /// [`crate::pipeline::leftovers`]).
    pub sweeps: crate::pipeline::leftovers::Sweeps,
    /// Since when GPU candidates wait for the node labeller (see [`crate::cache::labeller_wait`]).
    pub labeller_wait: crate::cache::labeller_wait::LabellerWait,
    /// The conditions waiting to go in one status request (see [`crate::pipeline::status_batch`]).
    pub status_batch: crate::pipeline::status_batch::StatusBatch,
    /// What the operands wrote, waiting to go in one `Applied` Event per owner (see
    /// [`crate::pipeline::events`]).
    pub applied_events: crate::pipeline::events::AppliedEvents,
    /// The API server's version and DRA API versions, discovered once at start-up (unknown until
    /// [`Context::with_server`] sets them).
    pub server: ServerFacts,
}

impl Context {
    /// A context for `client` in `namespace`; `instance` names this operator process in Events.
    /// `image_vars` are the environment variables that give operand images (the binary's
    /// operand registry derives them from every operand's [`crate::contract::Operand::IMAGES`]);
    /// those set in the environment are read now.
    pub fn new(
        client: kube::Client,
        namespace: String,
        stores: Stores,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        image_vars: &[&str],
    ) -> Self {
        let reporter = Reporter {
            controller: "gpu-operator".to_owned(),
            instance,
        };
        let one_off_events = OneOffEvents::new(client.clone(), reporter.clone());
        let recorder = Recorder::new(client.clone(), reporter);
        let image_env = image_vars
            .iter()
            .filter_map(|name| {
                std::env::var(name)
                    .ok()
                    .map(|value| ((*name).to_owned(), value))
            })
            .collect();
        Self {
            client,
            namespace,
            stores,
            metrics,
            recorder,
            one_off_events,
            image_env,
            problem_scans: ScanClock::default(),
            status_gate: WriteGate::default(),
            warned: crate::report::warned::Warned::default(),
            sweeps: crate::pipeline::leftovers::Sweeps::default(),
            labeller_wait: crate::cache::labeller_wait::LabellerWait::default(),
            status_batch: crate::pipeline::status_batch::StatusBatch::default(),
            applied_events: crate::pipeline::events::AppliedEvents::default(),
            server: ServerFacts::default(),
        }
    }

    /// This context with the API server's facts `server`, discovered at start-up.
    #[must_use]
    pub fn with_server(self, server: ServerFacts) -> Self {
        Self { server, ..self }
    }

    /// The facts of the caches right now. The pass over the node caches runs once per change of
    /// what it reads (see [`crate::cache::facts_memo`]), not once per reconcile.
    pub fn facts(&self) -> ClusterFacts {
        let (nodes, _) = self.stores.node_facts.get(|| {
            ClusterFacts::from_nodes(
                self.stores.nodes.state().iter().map(AsRef::as_ref),
                self.stores.node_runtimes.state().iter().map(AsRef::as_ref),
            )
        });
        ClusterFacts {
            service_monitor_crd: crate::build::service_monitor::crd_installed(&self.stores),
            prometheus_rule_crd: crate::build::prometheus_rule::crd_installed(&self.stores),
            daemonsets: self
                .stores
                .daemonsets
                .state()
                .iter()
                .map(|ds| {
                    (
                        kube::ResourceExt::name_any(ds.as_ref()),
                        LiveDaemonSet::of(ds),
                    )
                })
                .collect(),
            ..ClusterFacts::clone(&nodes)
        }
    }

    /// The image fallback of environment variable `name`, if set.
    pub fn image_env(&self, name: &str) -> Option<&str> {
        self.image_env.get(name).map(String::as_str)
    }
}
