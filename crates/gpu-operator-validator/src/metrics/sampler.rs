//! Computes the gauges when Prometheus scrapes: status files and PCI devices are read every time
//! (a few `stat`s), while the driver check and the Node read (its GPU capacity and the health
//! agent's conditions) are cached for [`CACHE_TTL`] so that
//! frequent scrapes stay cheap for the node and the API server. Concurrent scrapes wait for one
//! refresh instead of each running the checks.

use std::{
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio::sync::Mutex;
use tracing::{info, warn};

use super::gauges::{self, Gauges, Health, StatusFiles};
use crate::{
    components::{self, driver},
    config::MetricsConfig,
    nvml::Nvml,
};

/// How long a driver check or Node read is reused.
pub const CACHE_TTL: Duration = Duration::from_secs(30);

/// A value and when it was taken.
#[derive(Debug, Clone, Copy)]
struct Reading<T> {
    at: Instant,
    value: T,
}

impl<T: Clone> Reading<T> {
    fn fresh(this: Option<&Self>, now: Instant, ttl: Duration) -> Option<T> {
        this.filter(|r| now.duration_since(r.at) < ttl)
            .map(|r| r.value.clone())
    }
}

/// What the exporter reads from its Node.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeView {
    /// See [`Gauges::device_plugin_devices`].
    devices: i64,
    /// See [`Gauges::health`].
    health: Health,
}

impl NodeView {
    /// The Node could not be read.
    fn unknown() -> Self {
        Self {
            devices: -1,
            health: Health::default(),
        }
    }
}

/// What the sampler remembers between scrapes.
#[derive(Debug, Default)]
struct State {
    driver: Option<Reading<bool>>,
    driver_last_success: i64,
    node: Option<Reading<NodeView>>,
    devices_last_success: i64,
}

/// The gauges' source: configuration, NVML, the API client and the cache.
pub struct Sampler {
    cfg: MetricsConfig,
    nvml: Arc<dyn Nvml>,
    client: Option<kube::Client>,
    started: i64,
    ttl: Duration,
    state: Mutex<State>,
}

/// Now, in Unix seconds.
fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Sampler {
    /// A sampler; without a client the device count is -1.
    pub fn new(cfg: MetricsConfig, nvml: Arc<dyn Nvml>, client: Option<kube::Client>) -> Self {
        Self {
            cfg,
            nvml,
            client,
            started: unix_now(),
            ttl: CACHE_TTL,
            state: Mutex::new(State::default()),
        }
    }

    /// The node label's value.
    pub fn node(&self) -> &str {
        self.cfg.checks.node_name.as_deref().unwrap_or_default()
    }

    /// The gauges now, refreshing what is older than the cache's time to live.
    pub async fn sample(&self) -> Gauges {
        let mut state = self.state.lock().await;
        let now = Instant::now();
        let driver_ok = if let Some(ok) = Reading::fresh(state.driver.as_ref(), now, self.ttl) {
            ok
        } else {
            let ok = self.check_driver(state.driver.map(|r| r.value)).await;
            if ok {
                state.driver_last_success = unix_now();
            }
            state.driver = Some(Reading { at: now, value: ok });
            ok
        };
        let node = if let Some(view) = Reading::fresh(state.node.as_ref(), now, self.ttl) {
            view
        } else {
            let view = self.read_node(state.node.as_ref().map(|r| &r.value)).await;
            if view.devices > 0 {
                state.devices_last_success = unix_now();
            }
            state.node = Some(Reading {
                at: now,
                value: view.clone(),
            });
            view
        };
        Gauges {
            metrics_ready_ts: self.started,
            status_files: StatusFiles::read(&self.cfg.checks.output_dir),
            driver_validation: driver_ok,
            driver_validation_last_success_ts: state.driver_last_success,
            device_plugin_devices: node.devices,
            device_plugin_validation_last_success_ts: state.devices_last_success,
            nvidia_pci_devices: gauges::count_nvidia_pci(&self.cfg.checks.host_root_ctr_path),
            health: node.health,
        }
    }

    /// The `driver` component's check, off the async threads; logged when its result changes.
    async fn check_driver(&self, previous: Option<bool>) -> bool {
        let (cfg, nvml) = (self.cfg.checks.clone(), Arc::clone(&self.nvml));
        let outcome = tokio::task::spawn_blocking(move || driver::check(&cfg, nvml.as_ref()))
            .await
            .unwrap_or_else(|e| {
                Err(components::Failed::new(
                    gpu_operator_api::validator::reason::DRIVER_QUERY_FAILED,
                    format!("the driver check crashed: {e}"),
                ))
            });
        let ok = outcome.is_ok();
        if previous != Some(ok) {
            match outcome {
                Ok(passed) => info!(message = %passed.message, "metrics: the driver check passes"),
                Err(failed) => {
                    warn!(reason = failed.reason, message = %failed.message, "metrics: the driver check fails");
                }
            }
        }
        ok
    }

    /// The node's GPU devices and health report: devices -1 when the device plugin is disabled
    /// (so a disabled plugin does not look like a node without GPUs), everything unknown when
    /// the Node cannot be read.
    async fn read_node(&self, previous: Option<&NodeView>) -> NodeView {
        let (Some(client), Some(name)) = (&self.client, &self.cfg.checks.node_name) else {
            return NodeView::unknown();
        };
        let view = match Api::<Node>::all(client.clone()).get(name).await {
            Ok(node) => NodeView {
                devices: if self.cfg.device_plugin_enabled {
                    gauges::gpu_capacity(&node)
                } else {
                    -1
                },
                health: Health::of(&node),
            },
            Err(e) => {
                if previous != Some(&NodeView::unknown()) {
                    warn!(
                        node = %name,
                        error = %components::api_error(&e),
                        "metrics: cannot read the Node; reporting -1 devices and unknown health"
                    );
                }
                return NodeView::unknown();
            }
        };
        if previous.map(|p| p.devices) != Some(view.devices) {
            info!(node = %name, count = view.devices, "metrics: GPU devices advertised on the node");
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::{
        extract::Path,
        http::{StatusCode, header},
    };

    use k8s_openapi::api::core::v1::NodeCondition;

    use super::*;
    use crate::{
        config::{Invocation, parse},
        testing::{FakeNvml, Fixture, node_with_capacity, pci_device},
    };

    fn metrics_config(f: &Fixture) -> MetricsConfig {
        match parse(&["metrics".to_owned()], |n| f.vars.get(n).cloned()).unwrap() {
            Invocation::Metrics(m) => *m,
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn gauges_come_from_the_files_the_driver_check_and_sysfs() {
        let mut f = Fixture::new("metrics");
        f.set("NODE_NAME", "gpu-node-1");
        f.load_module("570.172.08");
        f.install_smi(&f.host(), "570.172.08", 2);
        f.install_nvml(&f.host());
        std::fs::write(f.dir.path().join("validations/driver-ready"), "").unwrap();
        std::fs::write(f.dir.path().join("validations/toolkit-ready"), "").unwrap();
        pci_device(&f.host(), "0000:18:00.0", "0x10de");
        pci_device(&f.host(), "0000:19:00.0", "0x10de");
        pci_device(&f.host(), "0000:00:1f.0", "0x8086");
        let nvml = Arc::new(FakeNvml::ok("570.172.08", 2));
        let sampler = Sampler::new(metrics_config(&f), nvml.clone(), None);
        assert_eq!(sampler.node(), "gpu-node-1");

        let gauges = sampler.sample().await;
        assert_eq!(
            gauges.status_files,
            StatusFiles {
                driver: true,
                toolkit: true,
                plugin: false,
                cuda: false,
            }
        );
        assert!(gauges.driver_validation);
        assert!(gauges.driver_validation_last_success_ts > 0);
        assert!(gauges.metrics_ready_ts > 0);
        assert_eq!(gauges.device_plugin_devices, -1, "no client: unknown");
        assert_eq!(gauges.device_plugin_validation_last_success_ts, 0);
        assert_eq!(gauges.nvidia_pci_devices, 2);
        assert_eq!(nvml.loaded().len(), 1);

        // Within the time to live the driver check is reused, the files are read again.
        f.unload_module();
        std::fs::write(f.dir.path().join("validations/cuda-ready"), "").unwrap();
        let again = sampler.sample().await;
        assert!(again.driver_validation && again.status_files.cuda);
        assert_eq!(nvml.loaded().len(), 1, "cached");
    }

    #[tokio::test]
    async fn an_expired_driver_check_runs_again_and_keeps_the_last_success() {
        let f = Fixture::new("metrics");
        f.load_module("570.172.08");
        f.install_smi(&f.host(), "570.172.08", 1);
        let mut sampler = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("570.172.08", 1)),
            None,
        );
        sampler.ttl = Duration::ZERO;
        let first = sampler.sample().await;
        assert!(first.driver_validation);
        f.unload_module();
        let second = sampler.sample().await;
        assert!(!second.driver_validation);
        assert_eq!(
            second.driver_validation_last_success_ts,
            first.driver_validation_last_success_ts
        );
        assert_eq!(second.nvidia_pci_devices, -1, "no sysfs in the fake host");
    }

    /// An in-process stand-in for the API server answering `GET /api/v1/nodes/gpu-node-1` with
    /// `node` (404 for other nodes); returns a client for it and the number of requests served.
    async fn api_serving(node: Node) -> (kube::Client, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        let app = axum::Router::new().route(
            "/api/v1/nodes/{name}",
            axum::routing::get(move |Path(name): Path<String>| {
                counter.fetch_add(1, Ordering::SeqCst);
                let node = serde_json::to_string(&node).unwrap();
                async move {
                    let json = [(header::CONTENT_TYPE, "application/json")];
                    if name == "gpu-node-1" {
                        return (StatusCode::OK, json, node);
                    }
                    let status = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "reason": "NotFound", "code": 404,
                        "message": format!("nodes \"{name}\" not found")});
                    (StatusCode::NOT_FOUND, json, status.to_string())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let config = kube::Config::new(url.parse().unwrap());
        (kube::Client::try_from(config).unwrap(), hits)
    }

    #[tokio::test]
    async fn the_device_count_is_the_nodes_gpu_capacity_read_once_per_ttl() {
        let mut f = Fixture::new("metrics");
        f.set("NODE_NAME", "gpu-node-1");
        let node = node_with_capacity(&[("nvidia.com/gpu", "8"), ("cpu", "96")]);
        let (client, hits) = api_serving(node).await;
        let sampler = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("1", 1)),
            Some(client.clone()),
        );
        let gauges = sampler.sample().await;
        assert_eq!(gauges.device_plugin_devices, 8);
        assert!(gauges.device_plugin_validation_last_success_ts > 0);
        assert!(!gauges.driver_validation, "no driver under the fake host");
        assert_eq!(sampler.sample().await.device_plugin_devices, 8);
        assert_eq!(hits.load(Ordering::SeqCst), 1, "cached for the TTL");

        f.set("NODE_NAME", "gone");
        let missing = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("1", 1)),
            Some(client.clone()),
        );
        assert_eq!(missing.sample().await.device_plugin_devices, -1);
        assert_eq!(hits.load(Ordering::SeqCst), 2);

        f.set("DEVICE_PLUGIN_ENABLED", "false");
        let disabled = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("1", 1)),
            Some(client),
        );
        let gauges = disabled.sample().await;
        assert_eq!(gauges.device_plugin_devices, -1);
        assert_eq!(
            hits.load(Ordering::SeqCst),
            3,
            "the Node is still read for its health report"
        );
    }

    #[tokio::test]
    async fn the_health_agents_conditions_become_gauges() {
        let mut f = Fixture::new("metrics");
        f.set("NODE_NAME", "gpu-node-1");
        let mut node = node_with_capacity(&[("nvidia.com/gpu", "8")]);
        let condition = |type_: &str, status: &str, reason: &str| NodeCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            ..NodeCondition::default()
        };
        node.status.get_or_insert_default().conditions = Some(vec![
            condition("Ready", "True", "KubeletReady"),
            condition("GPUHealthy", "False", "XidRebootNode"),
            condition("GPUXidError", "True", "XidRebootNode"),
            condition("GPUMemoryError", "False", "NoMemoryErrors"),
        ]);
        let (client, _) = api_serving(node).await;
        let sampler = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("1", 1)),
            Some(client.clone()),
        );
        let health = sampler.sample().await.health;
        assert_eq!(health.healthy, 0);
        assert_eq!(
            health.faults,
            [
                ("GPUXidError".into(), "XidRebootNode".into(), true),
                ("GPUMemoryError".into(), "NoMemoryErrors".into(), false),
            ]
        );

        f.set("NODE_NAME", "gone");
        let unread = Sampler::new(
            metrics_config(&f),
            Arc::new(FakeNvml::ok("1", 1)),
            Some(client),
        );
        assert_eq!(unread.sample().await.health, Health::default());
        assert_eq!(Health::default().healthy, -1, "unknown, not healthy");
    }
}
