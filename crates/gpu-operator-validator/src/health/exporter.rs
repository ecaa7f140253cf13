//! Reaching the node's DCGM exporter: its pod on this node is found once (a LIST by label and
//! node name; again only after a scrape fails, so a converged node costs no LIST), then
//! `GET /metrics` on the pod's address with a 5 s limit and a 16 MiB cap, over plain HTTP/1.0
//! (the exporter's own protocol; no client library needed for one GET).

use std::time::Duration;

use gpu_operator_health::{dcgm::XidWatch, reading::XidEvent};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, api::ListParams};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// The exporter pods' label, as the operand renders them.
const EXPORTER_LABEL: &str = "app=nvidia-dcgm-exporter";
/// Longest answer read.
const MAX_ANSWER: u64 = 16 << 20;
/// Time limit of one scrape.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The node's exporter.
pub struct Exporter {
    pods: Api<Pod>,
    node: String,
    port: u16,
    address: Option<String>,
    watch: XidWatch,
}

impl Exporter {
    /// The exporter on `node` among `pods` (the operator namespace), serving on `port`.
    pub fn new(pods: Api<Pod>, node: &str, port: u16) -> Self {
        Self {
            pods,
            node: node.to_owned(),
            port,
            address: None,
            watch: XidWatch::default(),
        }
    }

    /// The XIDs that changed since the last scrape, or why the exporter could not be read.
    pub async fn xids(&mut self) -> Result<Vec<XidEvent>, String> {
        let address = match self.address.clone() {
            Some(address) => address,
            None => self.find().await?,
        };
        match get_metrics(&address, self.port).await {
            Ok(text) => Ok(self.watch.events(&text)),
            Err(e) => {
                self.address = None;
                Err(e)
            }
        }
    }

    async fn find(&mut self) -> Result<String, String> {
        let params = ListParams::default()
            .labels(EXPORTER_LABEL)
            .fields(&format!("spec.nodeName={}", self.node));
        let pods = self
            .pods
            .list(&params)
            .await
            .map_err(|e| format!("listing the DCGM exporter pods: {e}"))?;
        let address = pods
            .items
            .iter()
            .find_map(|p| p.status.as_ref()?.pod_ip.clone())
            .ok_or_else(|| "no DCGM exporter pod with an address on this node".to_owned())?;
        self.address = Some(address.clone());
        Ok(address)
    }
}

/// `GET /metrics` from `address:port`; the body of a 200 answer.
pub async fn get_metrics(address: &str, port: u16) -> Result<String, String> {
    let host = if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_owned()
    };
    let scrape = async {
        let mut stream = TcpStream::connect((address, port))
            .await
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("asking {host}:{port}: {e}"))?;
        let mut answer = Vec::new();
        stream
            .take(MAX_ANSWER)
            .read_to_end(&mut answer)
            .await
            .map_err(|e| format!("reading {host}:{port}: {e}"))?;
        Ok::<_, String>(answer)
    };
    let answer = tokio::time::timeout(TIMEOUT, scrape)
        .await
        .map_err(|_| format!("{host}:{port} did not answer within {}s", TIMEOUT.as_secs()))??;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{host}:{port}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("{host}:{port}/metrics answered {status:?}"));
    }
    Ok(body.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn serve_once(answer: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf).await;
            stream.write_all(answer.as_bytes()).await.unwrap();
        });
        port
    }

    #[tokio::test]
    async fn a_200_gives_the_body_anything_else_says_what_came() {
        let port = serve_once("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nDCGM_FI_DEV_XID_ERRORS{gpu=\"0\"} 0\n").await;
        let body = get_metrics("127.0.0.1", port).await.unwrap();
        assert!(body.starts_with("DCGM_FI_DEV_XID_ERRORS"));
        let port = serve_once("HTTP/1.1 503 Service Unavailable\r\n\r\nbusy").await;
        let err = get_metrics("127.0.0.1", port).await.unwrap_err();
        assert!(err.contains("503"), "{err}");
        let port = serve_once("garbage without a header end").await;
        let err = get_metrics("127.0.0.1", port).await.unwrap_err();
        assert!(err.contains("not an HTTP answer"), "{err}");
    }

    #[tokio::test]
    async fn nothing_listening_is_an_error_naming_the_address() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let err = get_metrics("127.0.0.1", port).await.unwrap_err();
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    }
}
