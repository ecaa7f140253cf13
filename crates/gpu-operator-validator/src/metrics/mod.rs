//! The `metrics` component, NVIDIA's node status exporter (`nvidia-node-status-exporter` runs
//! `nvidia-validator` with `COMPONENT=metrics`): an HTTP server on `:METRICS_PORT` answering
//! `/metrics` with the node's gauges in Prometheus text (computed when scraped, see [`sampler`])
//! and `/healthz` with `ok`, until SIGTERM.
//!
//! | gauge (label `node`) | value |
//! |---|---|
//! | `gpu_operator_node_metrics_ready_ts_seconds` | when the exporter started |
//! | `gpu_operator_node_{driver,toolkit,plugin,cuda}_ready` | 1 while `OUTPUT_DIR/<component>-ready` exists |
//! | `gpu_operator_node_driver_validation` | 1 when the `driver` check passes now (cached 30 s) |
//! | `gpu_operator_node_driver_validation_last_success_ts_seconds` | when it last passed |
//! | `gpu_operator_node_device_plugin_devices_total` | capacity of the Node's `nvidia.com/gpu*` and `nvidia.com/mig-*` resources (cached 30 s); -1 when the Node cannot be read or `DEVICE_PLUGIN_ENABLED=false` |
//! | `gpu_operator_node_device_plugin_validation_last_success_ts_seconds` | when more than 0 devices were last seen |
//! | `gpu_operator_nvidia_pci_devices_total` | PCI devices of vendor `0x10de` under `HOST_ROOT_CTR_PATH/sys/bus/pci/devices`; -1 when unreadable |
//! | `gpu_operator_node_gpu_healthy` | the health agent's `GPUHealthy` on the Node: 1 True, 0 False, -1 unknown or not reported (cached 30 s) |
//! | `gpu_operator_node_gpu_fault` (also `condition`, `reason`) | 1 while the fault condition is True, 0 while False, one series per fault condition the Node carries |
//!
//! The text is written here (twelve gauges) rather than through a metrics registry,
//! since every value is computed per scrape and nothing accumulates.

pub mod gauges;
pub mod sampler;

use std::{
    net::{Ipv4Addr, SocketAddr},
    sync::Arc,
};

use axum::{Router, extract::State, http::header, response::IntoResponse, routing::get};
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::{config::MetricsConfig, lifecycle, nvml::Nvml};
pub use sampler::Sampler;

/// Content type of the Prometheus text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why the exporter stopped.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The port is taken or not allowed.
    #[error("cannot listen on {addr}: {source}; set METRICS_PORT to a free port")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server failed.
    #[error("the metrics server failed: {0}")]
    Serve(std::io::Error),
}

/// The exporter's routes over `sampler`.
pub fn router(sampler: Arc<Sampler>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .route("/", get(scrape))
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(sampler)
}

async fn scrape(State(sampler): State<Arc<Sampler>>) -> impl IntoResponse {
    let text = gauges::render(sampler.node(), &sampler.sample().await);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

/// Serves the metrics on every address at `cfg.port` until SIGTERM or SIGINT.
pub async fn serve(
    cfg: MetricsConfig,
    nvml: Arc<dyn Nvml>,
    client: Option<kube::Client>,
) -> Result<(), MetricsError> {
    let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, cfg.port));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    info!(addr = %bound, "serving the node metrics at /metrics");
    let sampler = Arc::new(Sampler::new(cfg, nvml, client));
    axum::serve(listener, router(sampler))
        .with_graceful_shutdown(async {
            if let Err(e) = lifecycle::idle().await {
                warn!("cannot watch for SIGTERM ({e}); serving until killed");
                std::future::pending::<()>().await;
            }
            info!("stopping the metrics server");
        })
        .await
        .map_err(MetricsError::Serve)
}
