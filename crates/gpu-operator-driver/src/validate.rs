//! Checks the ClusterPolicy for the driver and resolves its images per pool: the driver image with
//! the OS suffix (`DRIVER_IMAGE` as fallback), per-kernel tags for precompiled drivers, the
//! k8s-driver-manager image (`DRIVER_MANAGER_IMAGE`), and the GDS and GDRCopy sidecar images
//! (`GDS_IMAGE`, `GDRCOPY_IMAGE`). Pure.

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{DriverSpec, EnvVar, ImageSpec, KernelModuleType},
};
use gpu_operator_core::{
    Error,
    build::{
        component::{Component, Pull},
        image, runtime_class,
        shared::Shared,
    },
    contract::Cluster,
};

use crate::{
    pools::{self, Pool, os_tag},
    settings::{Probes, Sidecar, UserConfig},
};

/// What rendering the driver needs.
#[derive(Clone, Debug)]
pub struct Input {
    /// `spec.driver`'s container settings (`driver.args` replace the driver container's).
    pub component: Component,
    /// `driver.kernelModuleType`, `auto` when unset.
    pub kernel_module_type: KernelModuleType,
    /// The driver container's probes.
    pub probes: Probes,
    /// `driver.manager.env`, over the manager's defaults.
    pub manager_env: Vec<EnvVar>,
    /// `driver.manager`'s pull settings, for the manager init container.
    pub manager_pull: Pull,
    /// `spec.gds`'s sidecar settings (env, pull settings), when the section is there.
    pub gds: Option<Sidecar>,
    /// `spec.gdrcopy`'s sidecar settings (env, pull settings), when the section is there.
    pub gdrcopy: Option<Sidecar>,
    /// The user's configuration objects the pod mounts.
    pub config: UserConfig,
    /// Whether GPUDirect Storage is on (`gds.enabled`).
    pub gds_enabled: bool,
    /// Whether GDRCopy is on (`gdrcopy.enabled`).
    pub gdrcopy_enabled: bool,
    /// GPUDirect RDMA (`driver.rdma`).
    pub rdma: Rdma,
    /// The settings every operand pod shares.
    pub shared: Shared,
    /// The operator namespace (subject of the role bindings).
    pub namespace: String,
    /// The k8s-driver-manager init container image.
    pub manager_image: String,
    /// One entry per driver DaemonSet.
    pub pools: Vec<Pool>,
    /// GPU nodes no pool serves, in a sentence.
    pub unserved: Option<String>,
    /// What an NVIDIADriver adds (its driver type, its nodes, its pod settings); `None` for the
    /// ClusterPolicy's driver.
    pub nvidia_driver: Option<crate::nvidia_driver::PerDriver>,
}

/// `Ok(None)` when `driver.enabled` is false (it defaults to true), and when
/// `driver.useNvidiaDriverCRD` hands the drivers to NVIDIADriver objects.
pub fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
    if !spec.driver_enabled() || managed_by_nvidia_drivers(spec) {
        return Ok(None);
    }
    resolve(spec, cluster).map(Some)
}

/// Whether `driver.useNvidiaDriverCRD` is true: NVIDIADriver objects deploy the drivers.
pub fn managed_by_nvidia_drivers(spec: &ClusterPolicySpec) -> bool {
    spec.driver.use_nvidia_driver_crd == Some(true)
}

/// The driver's `Input` for `spec.driver` (with `spec.gds`, `spec.gdrcopy` and the shared pod
/// settings), whoever asks for it: the ClusterPolicy, or an NVIDIADriver (`crate::nvidia_driver`,
/// which passes its own driver sections in a spec of the same shape).
pub(crate) fn resolve(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Input, Error> {
    let driver = &spec.driver;
    let precompiled = driver.use_precompiled == Some(true);
    let gds = spec.gds.as_ref().filter(|_| spec.gds_enabled());
    let gdrcopy = spec.gdrcopy.as_ref().filter(|_| spec.gdrcopy_enabled());
    if precompiled && (gds.is_some() || gdrcopy.is_some()) {
        return Err(Error::InvalidSpec(
            "driver.usePrecompiled cannot be combined with gds.enabled or gdrcopy.enabled: \
             precompiled drivers ship without their sidecar modules"
                .to_owned(),
        ));
    }
    let env = |name: &str| (cluster.image_env)(name);
    let manager = driver.manager.clone().unwrap_or_default();
    let manager_image = image::resolve(
        "driver.manager",
        &manager.image,
        "DRIVER_MANAGER_IMAGE",
        env("DRIVER_MANAGER_IMAGE").as_deref(),
    )?;
    let base = if precompiled {
        precompiled_base(&driver.image)?
    } else {
        image::resolve(
            "driver",
            &driver.image,
            "DRIVER_IMAGE",
            env("DRIVER_IMAGE").as_deref(),
        )?
    };
    let gds_base = gds
        .map(|g| image::resolve("gds", &g.image, "GDS_IMAGE", env("GDS_IMAGE").as_deref()))
        .transpose()?;
    let gdrcopy_base = gdrcopy
        .map(|g| {
            image::resolve(
                "gdrcopy",
                &g.image,
                "GDRCOPY_IMAGE",
                env("GDRCOPY_IMAGE").as_deref(),
            )
        })
        .transpose()?;

    let facts = cluster.facts;
    let layout = pools::layout(facts, precompiled);
    let mut resolved = Vec::with_capacity(layout.len());
    for (name, os, kernel) in layout {
        let tag = os_tag(&os);
        check_os_paths(spec, &os.id, precompiled)?;
        let driver_image = match &kernel {
            Some(kernel) => image::with_os_tag(&format!("{base}-{kernel}"), &tag),
            None => image::with_os_tag(&base, &tag),
        };
        resolved.push(Pool {
            node_selector: pools::node_selector(&os, kernel.as_deref()),
            name,
            driver_image,
            gds_image: gds_base.as_deref().map(|i| image::with_os_tag(i, &tag)),
            gdrcopy_image: gdrcopy_base.as_deref().map(|i| image::with_os_tag(i, &tag)),
            runtime: runtime_class::detect_for_os(spec, facts, &os),
            os,
            kernel,
        });
    }
    Ok(Input::new(
        spec,
        cluster.namespace.to_owned(),
        manager_image,
        resolved,
        pools::unserved(facts, precompiled),
    ))
}

impl Input {
    /// What rendering needs from `spec`, with the namespace, the manager image and the pools
    /// resolved.
    pub fn new(
        spec: &ClusterPolicySpec,
        namespace: String,
        manager_image: String,
        pools: Vec<Pool>,
        unserved: Option<String>,
    ) -> Self {
        let driver = &spec.driver;
        let manager = driver.manager.clone().unwrap_or_default();
        Self {
            component: Component::of(&driver.image, &driver.container, driver.host_network),
            kernel_module_type: driver.kernel_module_type.unwrap_or_default(),
            probes: Probes::of(driver),
            manager_env: manager.env.unwrap_or_default(),
            manager_pull: Pull::of(&manager.image),
            gds: spec
                .gds
                .as_ref()
                .map(|g| Sidecar::of(&g.image, g.env.as_ref())),
            gdrcopy: spec
                .gdrcopy
                .as_ref()
                .map(|g| Sidecar::of(&g.image, g.env.as_ref())),
            config: UserConfig::of(driver),
            gds_enabled: spec.gds_enabled(),
            gdrcopy_enabled: spec.gdrcopy_enabled(),
            rdma: Rdma::of(driver),
            shared: Shared::of(spec),
            namespace,
            manager_image,
            pools,
            unserved,
            nvidia_driver: None,
        }
    }
}

/// GPUDirect RDMA, as `driver.rdma` asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rdma {
    /// `driver.rdma.enabled` unset or false.
    Off,
    /// On, with the MOFED driver of the network operator's container.
    On,
    /// On, with the host's MOFED (`driver.rdma.useHostMofed`).
    OnHostMofed,
}

impl Rdma {
    /// The RDMA setting of `driver`.
    pub fn of(driver: &DriverSpec) -> Self {
        let rdma = driver.rdma.as_ref();
        match (
            rdma.and_then(|r| r.enabled),
            rdma.and_then(|r| r.use_host_mofed),
        ) {
            (Some(true), Some(true)) => Self::OnHostMofed,
            (Some(true), _) => Self::On,
            _ => Self::Off,
        }
    }

    /// Whether RDMA is on: the peermem sidecar runs.
    pub fn enabled(self) -> bool {
        self != Self::Off
    }

    /// Whether RDMA is on with the host's MOFED.
    pub fn host_mofed(self) -> bool {
        self == Self::OnHostMofed
    }
}

/// The precompiled image without kernel and OS: `repository/image:<branch>`, or `image` alone.
fn precompiled_base(spec: &ImageSpec) -> Result<String, Error> {
    let missing = || {
        Error::InvalidSpec(
            "driver.usePrecompiled needs driver.repository, driver.image and driver.version (a \
             driver branch such as \"570\"), or driver.image alone; the operator's DRIVER_IMAGE \
             names a full driver version, not a branch"
                .to_owned(),
        )
    };
    match (spec.repository(), spec.name(), spec.version()) {
        (None, Some(image), None) => Ok(image.to_owned()),
        (Some(_), Some(_), Some(version)) if version.starts_with("sha256:") => {
            Err(Error::InvalidSpec(
                "driver.version is a digest; precompiled drivers are tagged per kernel, so set \
                 a driver branch such as \"570\""
                    .to_owned(),
            ))
        }
        (Some(repository), Some(image), Some(version)) => Ok(format!(
            "{}/{image}:{version}",
            repository.trim_end_matches('/')
        )),
        _ => Err(missing()),
    }
}

/// The repository and certificate ConfigMaps are mounted at OS-specific paths: the OS must have
/// them (only when compiling: precompiled drivers need no packages).
fn check_os_paths(spec: &ClusterPolicySpec, os_id: &str, precompiled: bool) -> Result<(), Error> {
    let driver = &spec.driver;
    let repo = driver
        .repo_config
        .as_ref()
        .and_then(|r| r.config_map_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let cert = driver
        .cert_config
        .as_ref()
        .and_then(|c| c.name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if precompiled {
        return Ok(());
    }
    if repo && crate::render::repo_config_dir(os_id).is_none() {
        return Err(Error::InvalidSpec(format!(
            "driver.repoConfig.configMapName: GPU nodes run {os_id}, which has no known package \
             repository directory; remove driver.repoConfig"
        )));
    }
    if cert && crate::render::cert_config_dir(os_id).is_none() {
        return Err(Error::InvalidSpec(format!(
            "driver.certConfig.name: GPU nodes run {os_id}, which has no known certificate \
             directory; remove driver.certConfig"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use gpu_operator_core::{cache::facts::ClusterFacts, fixtures};

    use super::*;

    const ENV: &[(&str, &str)] = &[
        ("DRIVER_IMAGE", "nvcr.io/nvidia/driver:595.91.07"),
        (
            "DRIVER_MANAGER_IMAGE",
            "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
        ),
    ];

    fn run(spec: &ClusterPolicySpec, facts: &ClusterFacts) -> Result<Option<Input>, Error> {
        let image_env = |name: &str| {
            ENV.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        };
        let cluster = Cluster {
            namespace: "gpu-operator",
            facts,
            image_env: &image_env,
            config_maps: &|_| None,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        validate(spec, &cluster)
    }

    fn profile(name: &str) -> ClusterFacts {
        fixtures::profiles()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap()
            .facts
    }

    fn images(input: &Input) -> Vec<&str> {
        input
            .pools
            .iter()
            .map(|p| p.driver_image.as_str())
            .collect()
    }

    #[test]
    fn the_driver_tag_gets_the_os_suffix_with_rhel_major_only() {
        let spec = ClusterPolicySpec::default();
        let ubuntu = run(&spec, &profile("h100-ubuntu22.04-containerd"))
            .unwrap()
            .unwrap();
        assert_eq!(
            images(&ubuntu),
            ["nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"]
        );
        let rhel = run(&spec, &profile("a100-rhel9.4-crio")).unwrap().unwrap();
        assert_eq!(images(&rhel), ["nvcr.io/nvidia/driver:595.91.07-rhel9"]);
    }

    #[test]
    fn a_digest_gets_no_os_suffix() {
        let mut spec = ClusterPolicySpec::default();
        spec.driver.image.name = Some("registry.local/driver@sha256:abc".into());
        let input = run(&spec, &profile("a100-rhel9.4-crio")).unwrap().unwrap();
        assert_eq!(images(&input), ["registry.local/driver@sha256:abc"]);
    }

    #[test]
    fn precompiled_tags_are_branch_kernel_and_os_and_need_a_branch() {
        let mut spec = ClusterPolicySpec::default();
        spec.driver.use_precompiled = Some(true);
        let error = run(&spec, &profile("ubuntu22.04-two-kernels"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("driver.usePrecompiled"), "{error}");
        spec.driver.image.repository = Some("nvcr.io/nvidia".into());
        spec.driver.image.name = Some("driver".into());
        spec.driver.image.version = Some("570".into());
        let input = run(&spec, &profile("ubuntu22.04-two-kernels"))
            .unwrap()
            .unwrap();
        assert_eq!(
            images(&input),
            [
                "nvcr.io/nvidia/driver:570-6.8.0-1021-aws-ubuntu22.04",
                "nvcr.io/nvidia/driver:570-6.8.0-1024-aws-ubuntu22.04"
            ]
        );
    }

    #[test]
    fn disabled_and_nvidia_driver_crd_mode_render_nothing() {
        let mut spec = ClusterPolicySpec::default();
        spec.driver.enabled = Some(false);
        assert!(run(&spec, &ClusterFacts::default()).unwrap().is_none());
        spec.driver.enabled = None;
        spec.driver.use_nvidia_driver_crd = Some(true);
        assert!(run(&spec, &ClusterFacts::default()).unwrap().is_none());
        assert!(managed_by_nvidia_drivers(&spec));
    }
}
