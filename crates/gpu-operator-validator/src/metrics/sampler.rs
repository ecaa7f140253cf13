//! Computes the gauges when Prometheus scrapes: status files and PCI devices are read every time
//! (a few `stat`s), while the driver check and the Node read are cached for [`CACHE_TTL`] so that
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

use super::gauges::{self, Gauges, StatusFiles};
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

impl<T: Copy> Reading<T> {
    fn fresh(this: Option<Self>, now: Instant, ttl: Duration) -> Option<T> {
        this.filter(|r| now.duration_since(r.at) < ttl)
            .map(|r| r.value)
    }
}

/// What the sampler remembers between scrapes.
#[derive(Debug, Default)]
struct State {
    driver: Option<Reading<bool>>,
    driver_last_success: i64,
    devices: Option<Reading<i64>>,
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
        let driver_ok = if let Some(ok) = Reading::fresh(state.driver, now, self.ttl) {
            ok
        } else {
            let ok = self.check_driver(state.driver.map(|r| r.value)).await;
            if ok {
                state.driver_last_success = unix_now();
            }
            state.driver = Some(Reading { at: now, value: ok });
            ok
        };
        let devices = if let Some(count) = Reading::fresh(state.devices, now, self.ttl) {
            count
        } else {
            let count = self.count_devices(state.devices.map(|r| r.value)).await;
            if count > 0 {
                state.devices_last_success = unix_now();
            }
            state.devices = Some(Reading {
                at: now,
                value: count,
            });
            count
        };
        Gauges {
            metrics_ready_ts: self.started,
            status_files: StatusFiles::read(&self.cfg.checks.output_dir),
            driver_validation: driver_ok,
            driver_validation_last_success_ts: state.driver_last_success,
            device_plugin_devices: devices,
            device_plugin_validation_last_success_ts: state.devices_last_success,
            nvidia_pci_devices: gauges::count_nvidia_pci(&self.cfg.checks.host_root_ctr_path),
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

    /// The node's GPU devices: -1 when the device plugin is disabled (so a disabled plugin does
    /// not look like a node without GPUs) or the Node cannot be read.
    async fn count_devices(&self, previous: Option<i64>) -> i64 {
        if !self.cfg.device_plugin_enabled {
            return -1;
        }
        let (Some(client), Some(name)) = (&self.client, &self.cfg.checks.node_name) else {
            return -1;
        };
        let count = match Api::<Node>::all(client.clone()).get(name).await {
            Ok(node) => gauges::gpu_capacity(&node),
            Err(e) => {
                if previous != Some(-1) {
                    warn!(
                        node = %name,
                        error = %components::api_error(&e),
                        "metrics: cannot read the Node; reporting -1 devices"
                    );
                }
                return -1;
            }
        };
        if previous != Some(count) {
            info!(node = %name, count, "metrics: GPU devices advertised on the node");
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::{
        extract::Path,
        http::{StatusCode, header},
    };

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
            2,
            "a disabled plugin is not looked up"
        );
    }
}
