//! What the DRA driver needs outside its spec. Of the API server (refused: nothing rendered, the
//! condition names what is missing and the fix): Kubernetes 1.34 or newer and a usable version
//! of `resource.k8s.io` served: `v1`, else `v1beta2` (the same schema; the objects are then read
//! and written at `v1beta2`, see `gpu_operator_core::dra_api`, and [`beta_api`] says so); a
//! server serving only `v1beta1`, or none, is refused. Of the GPU nodes (their nodes unserved:
//! the condition is not ready naming them, the others are served): a container runtime with CDI
//! (containerd 1.7 or newer, CRI-O 1.23 or newer; not Docker), through which the driver hands
//! devices to containers, and a driver of branch 580 or newer. What is not known (no discovery, a
//! node whose runtime or driver nobody reported) refuses nothing. Pure.

use gpu_operator_core::{
    Error,
    cache::{
        facts::{ClusterFacts, NodeSample},
        server_facts::ServerFacts,
    },
    contract::Warning,
    dra_api::DraApi,
};

/// The oldest Kubernetes the DRA driver runs on (`resource.k8s.io/v1` is GA there).
pub const MIN_KUBERNETES: (u32, u32) = (1, 34);
/// The oldest driver branch the DRA driver supports.
pub const MIN_DRIVER_MAJOR: u32 = 580;

/// Condition reasons of unmet prerequisites, and of the beta API in use.
pub mod reason {
    /// The API server's Kubernetes is older than 1.34.
    pub const KUBERNETES_UNSUPPORTED: &str = "KubernetesVersionUnsupported";
    /// The API server serves neither `resource.k8s.io/v1` nor `v1beta2`.
    pub const DRA_API_UNAVAILABLE: &str = "DRAAPIUnavailable";
    /// The DRA objects are read and written at `resource.k8s.io/v1beta2`: `v1` is not served
    /// (a warning: the condition's reason while it is `True`, and one Warning Event).
    pub const DRA_API_BETA: &str = "DRAAPIBeta";
}

/// The server's prerequisites: `Err` naming the first unmet one and its fix.
pub fn server(server: &ServerFacts) -> Result<(), Error> {
    let (min_major, min_minor) = MIN_KUBERNETES;
    if let Some((major, minor)) = server.version
        && (major, minor) < MIN_KUBERNETES
    {
        return Err(Error::Unmet {
            reason: reason::KUBERNETES_UNSUPPORTED,
            message: format!(
                "the API server runs Kubernetes {major}.{minor}; the DRA driver needs \
                 {min_major}.{min_minor} or newer (resource.k8s.io/v1): upgrade the cluster, \
                 nothing deployed meanwhile"
            ),
        });
    }
    if server.dra_api().is_some() {
        return Ok(());
    }
    let message = if server.resource_api_versions.is_empty() {
        "the API server serves no version of resource.k8s.io (Dynamic Resource Allocation): \
         enable resource.k8s.io/v1 (on by default from Kubernetes 1.34; check the API server's \
         --runtime-config), nothing deployed meanwhile"
            .to_owned()
    } else {
        format!(
            "the API server serves resource.k8s.io {} but neither v1 nor v1beta2, the versions \
             the DRA driver's objects are written in: enable resource.k8s.io/v1 \
             (--runtime-config=resource.k8s.io/v1=true; or resource.k8s.io/v1beta2=true), \
             nothing deployed meanwhile",
            server.resource_api_versions.join(", ")
        )
    };
    Err(Error::Unmet {
        reason: reason::DRA_API_UNAVAILABLE,
        message,
    })
}

/// The warning that the DRA objects go through `resource.k8s.io/v1beta2`, where the server
/// serves it but not `v1`; `None` on `v1`.
pub fn beta_api(server: &ServerFacts) -> Option<Warning> {
    let api = server.dra_api().filter(|api| *api != DraApi::V1)?;
    Some(Warning {
        reason: reason::DRA_API_BETA,
        message: format!(
            "serving DRA through resource.k8s.io/{api}: the API server does not serve \
             resource.k8s.io/v1 (it serves {served}); the DRA objects are read and written at \
             {api}, whose schema is v1's: enable resource.k8s.io/v1 \
             (--runtime-config=resource.k8s.io/v1=true) to use the GA version",
            api = api.version(),
            served = server.resource_api_versions.join(", "),
        ),
    })
}

/// The GPU nodes the DRA driver cannot serve and why, in a sentence; `None` when every node it
/// knows enough about can be served.
pub fn unserved_nodes(facts: &ClusterFacts) -> Option<String> {
    let mut problems = Vec::new();
    for (runtime, nodes) in &facts.gpu_nodes_by_runtime_version {
        if let Some(missing) = without_cdi(runtime) {
            problems.push(format!(
                "{} run {missing}: the DRA driver hands GPUs to containers through CDI (upgrade \
                 to containerd 1.7 or newer with CDI enabled, or CRI-O 1.23 or newer)",
                nodes.describe()
            ));
        }
    }
    let mut old_drivers = NodeSample::default();
    let mut branches = Vec::new();
    for (major, nodes) in &facts.gpu_nodes_by_driver_major {
        if major.parse::<u32>().is_ok_and(|m| m < MIN_DRIVER_MAJOR) {
            old_drivers.merge(nodes);
            branches.push(major.as_str());
        }
    }
    if old_drivers.count > 0 {
        problems.push(format!(
            "{} run driver branch {}: the DRA driver needs branch {MIN_DRIVER_MAJOR} or newer \
             (upgrade the driver)",
            old_drivers.describe(),
            branches.join(", ")
        ));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// What a `containerRuntimeVersion` such as `containerd://1.6.20` lacks for CDI, said as the
/// runtime; `None` when it has CDI or we do not know.
fn without_cdi(runtime: &str) -> Option<String> {
    let (name, version) = runtime.split_once("://")?;
    let (major, minor) = major_minor(version.trim_start_matches('v'))?;
    let too_old = match name {
        "containerd" => (major, minor) < (1, 7),
        "cri-o" => (major, minor) < (1, 23),
        "docker" => true,
        _ => false,
    };
    too_old.then(|| format!("{name} {version}, without CDI"))
}

fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_of(version: Option<(u32, u32)>, resource: &[&str]) -> ServerFacts {
        ServerFacts {
            version,
            resource_api_versions: resource.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn reason_of(result: Result<(), Error>) -> (&'static str, String) {
        let error = result.unwrap_err();
        (error.category(), error.to_string())
    }

    #[test]
    fn an_unknown_server_refuses_nothing() {
        assert!(server(ServerFacts::unknown()).is_ok());
        assert!(server(&server_of(Some((1, 34)), &["v1", "v1beta2"])).is_ok());
        assert!(server(&server_of(Some((1, 35)), &["v1"])).is_ok());
        assert!(beta_api(ServerFacts::unknown()).is_none());
        assert!(beta_api(&server_of(Some((1, 34)), &["v1", "v1beta2"])).is_none());
    }

    #[test]
    fn kubernetes_before_1_34_is_refused_naming_the_version() {
        let (reason, message) = reason_of(server(&server_of(Some((1, 33)), &["v1beta2"])));
        assert_eq!(reason, reason::KUBERNETES_UNSUPPORTED);
        assert!(
            message.contains("Kubernetes 1.33") && message.contains("1.34"),
            "{message}"
        );
    }

    #[test]
    fn v1beta2_without_v1_is_served_with_a_warning() {
        let beta = server_of(Some((1, 34)), &["v1beta2", "v1beta1"]);
        assert!(server(&beta).is_ok());
        let warning = beta_api(&beta).unwrap();
        assert_eq!(warning.reason, reason::DRA_API_BETA);
        assert!(
            warning.message.starts_with(
                "serving DRA through resource.k8s.io/v1beta2: the API server does not serve \
                 resource.k8s.io/v1 (it serves v1beta2, v1beta1)"
            ),
            "{}",
            warning.message
        );
    }

    #[test]
    fn only_v1beta1_or_nothing_is_refused_naming_what_is_served() {
        let (reason, message) = reason_of(server(&server_of(Some((1, 34)), &["v1beta1"])));
        assert_eq!(reason, reason::DRA_API_UNAVAILABLE);
        assert!(
            message.contains("serves resource.k8s.io v1beta1 but neither v1 nor v1beta2"),
            "{message}"
        );
        assert!(
            message.contains("--runtime-config=resource.k8s.io/v1=true"),
            "{message}"
        );
        let (reason, message) = reason_of(server(&server_of(Some((1, 34)), &[])));
        assert_eq!(reason, reason::DRA_API_UNAVAILABLE);
        assert!(
            message.contains("no version of resource.k8s.io"),
            "{message}"
        );
    }

    fn sample(names: &[&str]) -> NodeSample {
        let mut sample = NodeSample::default();
        for name in names {
            sample.add(name);
        }
        sample
    }

    #[test]
    fn nodes_without_cdi_or_with_an_old_driver_are_unserved() {
        let mut facts = ClusterFacts::default();
        assert_eq!(unserved_nodes(&facts), None);
        facts
            .gpu_nodes_by_runtime_version
            .insert("containerd://1.7.27".to_owned(), sample(&["a"]));
        facts
            .gpu_nodes_by_runtime_version
            .insert("cri-o://1.30.2".to_owned(), sample(&["b"]));
        facts
            .gpu_nodes_by_driver_major
            .insert("580".to_owned(), sample(&["a", "b"]));
        assert_eq!(unserved_nodes(&facts), None);
        facts
            .gpu_nodes_by_runtime_version
            .insert("containerd://1.6.20".to_owned(), sample(&["c"]));
        facts
            .gpu_nodes_by_driver_major
            .insert("550".to_owned(), sample(&["d"]));
        let sentence = unserved_nodes(&facts).unwrap();
        assert!(
            sentence.contains("(c) run containerd 1.6.20, without CDI"),
            "{sentence}"
        );
        assert!(sentence.contains("(d) run driver branch 550"), "{sentence}");
    }

    #[test]
    fn runtimes_are_judged_by_name_and_version() {
        assert_eq!(without_cdi("containerd://1.7.0"), None);
        assert_eq!(without_cdi("containerd://2.0.4"), None);
        assert!(without_cdi("containerd://1.6.33").is_some());
        assert!(without_cdi("cri-o://1.22.1").is_some());
        assert_eq!(without_cdi("cri-o://1.23.0"), None);
        assert!(without_cdi("docker://24.0.7").is_some());
        assert_eq!(without_cdi("unknown"), None);
        assert_eq!(without_cdi("containerd://weird"), None);
    }
}
