//! Discovery of the API server's facts at start-up: its Kubernetes version (`/version`) and the
//! versions of `resource.k8s.io` it serves (the API group list), which the DRA operands check
//! before they render. A failed discovery leaves everything unknown, which refuses nothing.

use gpu_operator_core::cache::server_facts::ServerFacts;

/// The API group of Dynamic Resource Allocation.
const RESOURCE_GROUP: &str = "resource.k8s.io";

/// Asks the API server; on any error, logs it and knows nothing.
pub async fn discover(client: &kube::Client) -> ServerFacts {
    let version = match client.apiserver_version().await {
        Ok(info) => ServerFacts::parse_version(&info.major, &info.minor),
        Err(error) => {
            tracing::warn!(%error, "reading the API server's version; DRA prerequisites unknown");
            return ServerFacts::default();
        }
    };
    let groups = match client.list_api_groups().await {
        Ok(groups) => groups,
        Err(error) => {
            tracing::warn!(%error, "listing the API groups; DRA prerequisites unknown");
            return ServerFacts::default();
        }
    };
    let resource_api_versions = groups
        .groups
        .iter()
        .filter(|group| group.name == RESOURCE_GROUP)
        .flat_map(|group| group.versions.iter().map(|v| v.version.clone()))
        .collect();
    let facts = ServerFacts {
        version,
        resource_api_versions,
    };
    tracing::info!(version = ?facts.version, resource_api_versions = ?facts.resource_api_versions, "API server discovered");
    facts
}
