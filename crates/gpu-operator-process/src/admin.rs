//! The two admin HTTP servers, as NVIDIA's operator has them: metrics on
//! `--metrics-bind-address` (`/metrics`, Prometheus/OpenMetrics text) and probes on
//! `--health-probe-bind-address` (`/healthz`: the process is alive; `/readyz`: every cache has
//! synced and shutdown has not begun). Both stop when the [`Shutdown`] fires.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, SocketAddr},
    str::FromStr,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use axum::{
    Router, extract::State, http::StatusCode, http::header, response::IntoResponse, routing::get,
};
use gpu_operator_core::report::metrics::Metrics;
use tokio::{net::TcpListener, task::JoinHandle};

use crate::shutdown::Shutdown;

/// Errors of the admin servers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address flag could not be parsed.
    #[error(
        "invalid bind address `{value}`: use `:PORT`, `HOST:PORT` or `IP:PORT` (e.g. `:8080`, `0.0.0.0:8080`, `127.0.0.1:0`)"
    )]
    InvalidAddress {
        /// What was given.
        value: String,
    },
    /// A server could not bind its address.
    #[error("cannot serve on {addr} (--{flag}): {source}; pick a free port with --{flag}")]
    Bind {
        /// The flag that named the address.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server failed while serving.
    #[error("the --{flag} server failed: {source}")]
    Serve {
        /// The flag of the server.
        flag: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A server task panicked or was cancelled.
    #[error("the --{flag} server task ended abnormally: {source}")]
    Task {
        /// The flag of the server.
        flag: &'static str,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Flag names, for error messages.
const METRICS_FLAG: &str = "metrics-bind-address";
const PROBE_FLAG: &str = "health-probe-bind-address";

/// Where a server listens, or (`0`, as controller-runtime has it for metrics) that it is off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindAddress {
    /// Do not serve.
    Disabled,
    /// Listen here; port 0 picks a free port.
    Addr(SocketAddr),
}

impl FromStr for BindAddress {
    type Err = Error;

    /// Accepts `0` (disabled), `:8080` (every IPv4 interface), `IP:PORT`, `[IPv6]:PORT` and
    /// `localhost:PORT`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let invalid = || Error::InvalidAddress {
            value: value.to_owned(),
        };
        let trimmed = value.trim();
        if trimmed == "0" {
            return Ok(Self::Disabled);
        }
        if let Ok(addr) = trimmed.parse::<SocketAddr>() {
            return Ok(Self::Addr(addr));
        }
        let (host, port) = trimmed.rsplit_once(':').ok_or_else(invalid)?;
        let port: u16 = port.parse().map_err(|_| invalid())?;
        let ip = match host {
            "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            _ => return Err(invalid()),
        };
        Ok(Self::Addr(SocketAddr::new(ip, port)))
    }
}

impl fmt::Display for BindAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("0"),
            Self::Addr(addr) => addr.fmt(f),
        }
    }
}

/// Whether the process is ready: every cache has synced and shutdown has not begun. Cheap to
/// clone; every clone shares the same state.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<ReadinessState>);

#[derive(Debug, Default)]
struct ReadinessState {
    synced: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// Every cache has synced: `/readyz` answers 200 (unless shutdown began).
    pub fn set_ready(&self) {
        self.0.synced.store(true, Ordering::Release);
    }

    /// Shutdown began: `/readyz` answers 503 from now on, whatever else happens.
    pub fn set_shutting_down(&self) {
        self.0.shutting_down.store(true, Ordering::Release);
    }

    /// What `/readyz` says.
    pub fn is_ready(&self) -> bool {
        self.0.synced.load(Ordering::Acquire) && !self.0.shutting_down.load(Ordering::Acquire)
    }
}

/// The running admin servers and the addresses they actually bound (port 0 resolved).
#[derive(Debug)]
pub struct AdminServers {
    /// Where `/metrics` is served, unless disabled.
    pub metrics_addr: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served, unless disabled.
    pub probe_addr: Option<SocketAddr>,
    tasks: Vec<(&'static str, JoinHandle<Result<(), std::io::Error>>)>,
}

impl AdminServers {
    /// Waits until both servers have stopped (after the shutdown fired).
    pub async fn join(self) -> Result<(), Error> {
        for (flag, task) in self.tasks {
            task.await
                .map_err(|source| Error::Task { flag, source })?
                .map_err(|source| Error::Serve { flag, source })?;
        }
        Ok(())
    }
}

/// Binds both servers (failing with a message naming the flag) and serves them in background
/// tasks until `shutdown` fires.
pub async fn serve(
    metrics_bind: BindAddress,
    probe_bind: BindAddress,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    shutdown: &Shutdown,
) -> Result<AdminServers, Error> {
    let metrics_router = Router::new()
        .route("/metrics", get(serve_metrics))
        .with_state(metrics);
    let probe_router = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(serve_readyz))
        .with_state(readiness);
    let mut tasks = Vec::new();
    let metrics_addr = start(
        METRICS_FLAG,
        metrics_bind,
        metrics_router,
        shutdown,
        &mut tasks,
    )
    .await?;
    let probe_addr = start(PROBE_FLAG, probe_bind, probe_router, shutdown, &mut tasks).await?;
    Ok(AdminServers {
        metrics_addr,
        probe_addr,
        tasks,
    })
}

async fn start(
    flag: &'static str,
    bind: BindAddress,
    router: Router,
    shutdown: &Shutdown,
    tasks: &mut Vec<(&'static str, JoinHandle<Result<(), std::io::Error>>)>,
) -> Result<Option<SocketAddr>, Error> {
    let BindAddress::Addr(addr) = bind else {
        tracing::info!(flag, "server disabled");
        return Ok(None);
    };
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { flag, addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { flag, addr, source })?;
    tracing::info!(flag, addr = %bound, "serving");
    let task = tokio::spawn(
        axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.signal())
            .into_future(),
    );
    tasks.push((flag, task));
    Ok(Some(bound))
}

async fn serve_metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    match metrics.encode() {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        ),
        Err(error) => {
            tracing::error!(%error, "encoding the metrics failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "encoding the metrics failed\n".to_owned(),
            )
        }
    }
}

async fn serve_readyz(State(readiness): State<Readiness>) -> (StatusCode, &'static str) {
    if readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else if readiness.0.shutting_down.load(Ordering::Acquire) {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced yet")
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    fn addr(value: &str) -> BindAddress {
        value.parse().unwrap()
    }

    #[test]
    fn parses_controller_runtime_addresses() {
        assert_eq!(
            addr(":8080"),
            BindAddress::Addr("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            addr("0.0.0.0:8081"),
            BindAddress::Addr("0.0.0.0:8081".parse().unwrap())
        );
        assert_eq!(
            addr("127.0.0.1:0"),
            BindAddress::Addr("127.0.0.1:0".parse().unwrap())
        );
        assert_eq!(
            addr("[::1]:9000"),
            BindAddress::Addr("[::1]:9000".parse().unwrap())
        );
        assert_eq!(
            addr("localhost:9000"),
            BindAddress::Addr("127.0.0.1:9000".parse().unwrap())
        );
        assert_eq!(addr("0"), BindAddress::Disabled);
        for bad in ["", "8080", ":http", "example.com:80", ":70000"] {
            let error = bad.parse::<BindAddress>().unwrap_err().to_string();
            assert!(error.contains("invalid bind address"), "{bad}: {error}");
        }
    }

    /// One HTTP/1.1 GET; returns the status code and the body.
    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split(' ').nth(1).unwrap().parse().unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1.to_owned();
        (status, body)
    }

    #[tokio::test]
    async fn probes_follow_readiness_and_metrics_are_served() {
        let readiness = Readiness::default();
        let shutdown = Shutdown::new(readiness.clone());
        let metrics = Arc::new(Metrics::new());
        let servers = serve(
            addr("127.0.0.1:0"),
            addr("127.0.0.1:0"),
            metrics,
            readiness.clone(),
            &shutdown,
        )
        .await
        .unwrap();
        let probes = servers.probe_addr.unwrap();
        let metrics_addr = servers.metrics_addr.unwrap();
        assert_ne!(probes.port(), 0);

        assert_eq!(get(probes, "/healthz").await.0, 200);
        assert_eq!(
            get(probes, "/readyz").await,
            (503, "caches not synced yet".to_owned())
        );
        readiness.set_ready();
        assert_eq!(get(probes, "/readyz").await.0, 200);
        assert_eq!(get(probes, "/metrics").await.0, 404);

        let (status, body) = get(metrics_addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("gpu_operator_reconciliation_status"),
            "{body}"
        );
        assert!(body.contains("# EOF"), "{body}");

        readiness.set_shutting_down();
        assert_eq!(
            get(probes, "/readyz").await,
            (503, "shutting down".to_owned())
        );
        shutdown.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(5), servers.join())
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn bind_errors_name_the_flag_and_disabled_servers_do_not_bind() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap();
        let shutdown = Shutdown::new(Readiness::default());
        let error = serve(
            BindAddress::Disabled,
            BindAddress::Addr(port),
            Arc::new(Metrics::new()),
            Readiness::default(),
            &shutdown,
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("--health-probe-bind-address"), "{error}");
        assert!(error.contains(&port.to_string()), "{error}");

        let servers = serve(
            BindAddress::Disabled,
            addr("127.0.0.1:0"),
            Arc::new(Metrics::new()),
            Readiness::default(),
            &shutdown,
        )
        .await
        .unwrap();
        assert_eq!(servers.metrics_addr, None);
        shutdown.trigger();
        servers.join().await.unwrap();
    }
}
