//! The driver's settings resolved from `spec.driver`, `spec.gds` and `spec.gdrcopy` once, by
//! validation, so that the `Input` carries no raw section: the probe timings the user set, the
//! GDS and GDRCopy sidecars' env and pull settings, and the names of the user's configuration
//! objects the pod mounts ([`UserConfig`]).

use gpu_operator_api::spec::{ContainerProbeSpec, DriverSpec, EnvVar, ImageSpec};
use gpu_operator_core::build::component::Pull;

/// The timings of a probe that the user set (non-zero), each replacing its default, as NVIDIA
/// applies `driver.{startup,liveness,readiness}Probe`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeTimings {
    /// `initialDelaySeconds`.
    pub initial_delay_seconds: Option<i32>,
    /// `periodSeconds`.
    pub period_seconds: Option<i32>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<i32>,
    /// `successThreshold`.
    pub success_threshold: Option<i32>,
    /// `failureThreshold`.
    pub failure_threshold: Option<i32>,
}

impl ProbeTimings {
    /// The timings `probe` sets, zero read as unset.
    pub fn of(probe: &ContainerProbeSpec) -> Self {
        let set = |value: Option<i32>| value.filter(|v| *v != 0);
        Self {
            initial_delay_seconds: set(probe.initial_delay_seconds),
            period_seconds: set(probe.period_seconds),
            timeout_seconds: set(probe.timeout_seconds),
            success_threshold: set(probe.success_threshold),
            failure_threshold: set(probe.failure_threshold),
        }
    }
}

/// The driver container's probes: the startup probe always runs (with the user's timings, if
/// any); a liveness or readiness probe runs only when asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// `driver.startupProbe`'s timings, none when unset.
    pub startup: ProbeTimings,
    /// `driver.livenessProbe`, when set.
    pub liveness: Option<ProbeTimings>,
    /// `driver.readinessProbe`, when set.
    pub readiness: Option<ProbeTimings>,
}

impl Probes {
    /// The probes `driver` asks for.
    pub fn of(driver: &DriverSpec) -> Self {
        Self {
            startup: driver
                .startup_probe
                .as_ref()
                .map(ProbeTimings::of)
                .unwrap_or_default(),
            liveness: driver.liveness_probe.as_ref().map(ProbeTimings::of),
            readiness: driver.readiness_probe.as_ref().map(ProbeTimings::of),
        }
    }
}

/// What a GDS or GDRCopy sidecar takes from its section: its env and its image's pull settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sidecar {
    /// `<section>.env`, empty when unset.
    pub env: Vec<EnvVar>,
    /// `<section>.{imagePullPolicy,imagePullSecrets}`.
    pub pull: Pull,
}

impl Sidecar {
    /// The sidecar settings of a section with `image` and `env`.
    pub fn of(image: &ImageSpec, env: Option<&Vec<EnvVar>>) -> Self {
        Self {
            env: env.cloned().unwrap_or_default(),
            pull: Pull::of(image),
        }
    }
}

/// The user's configuration objects the driver pod mounts, each name non-empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserConfig {
    /// Whether the driver is precompiled (`driver.usePrecompiled`): nothing is compiled on the
    /// node, so no repositories, certificates or entitlements are mounted.
    pub precompiled: bool,
    /// `driver.repoConfig.configMapName`.
    pub repo_config: Option<String>,
    /// `driver.certConfig.name`.
    pub cert_config: Option<String>,
    /// `driver.licensingConfig`, when it names a Secret or a ConfigMap.
    pub licensing: Option<Licensing>,
    /// `driver.virtualTopology.config`.
    pub virtual_topology: Option<String>,
    /// `driver.kernelModuleConfig.name`.
    pub kernel_module_config: Option<String>,
    /// `driver.secretEnv`.
    pub secret_env: Option<String>,
}

/// vGPU guest licensing (`driver.licensingConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Licensing {
    /// `secretName`, which wins over the deprecated `configMapName`.
    pub secret: Option<String>,
    /// `configMapName`.
    pub config_map: Option<String>,
    /// `nlsEnabled: true`: the client token is mounted too.
    pub nls: bool,
}

impl UserConfig {
    /// The configuration objects `driver` names.
    pub fn of(driver: &DriverSpec) -> Self {
        let licensing = driver.licensing_config.as_ref().and_then(|l| {
            let secret = non_empty(l.secret_name.as_ref());
            let config_map = non_empty(l.config_map_name.as_ref());
            (secret.is_some() || config_map.is_some()).then(|| Licensing {
                secret,
                config_map,
                nls: l.nls_enabled == Some(true),
            })
        });
        Self {
            precompiled: driver.use_precompiled == Some(true),
            repo_config: non_empty(
                driver
                    .repo_config
                    .as_ref()
                    .and_then(|r| r.config_map_name.as_ref()),
            ),
            cert_config: non_empty(driver.cert_config.as_ref().and_then(|c| c.name.as_ref())),
            licensing,
            virtual_topology: non_empty(
                driver
                    .virtual_topology
                    .as_ref()
                    .and_then(|t| t.config.as_ref()),
            ),
            kernel_module_config: non_empty(
                driver
                    .kernel_module_config
                    .as_ref()
                    .and_then(|k| k.name.as_ref()),
            ),
            secret_env: non_empty(driver.secret_env.as_ref()),
        }
    }
}

fn non_empty(value: Option<&String>) -> Option<String> {
    value.filter(|v| !v.is_empty()).cloned()
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::DriverLicensingConfigSpec;

    use super::*;

    #[test]
    fn zero_timings_and_empty_names_count_as_unset() {
        let probe = ContainerProbeSpec {
            period_seconds: Some(0),
            failure_threshold: Some(5),
            ..ContainerProbeSpec::default()
        };
        let timings = ProbeTimings::of(&probe);
        assert_eq!(timings.period_seconds, None);
        assert_eq!(timings.failure_threshold, Some(5));
        let mut driver = DriverSpec {
            secret_env: Some(String::new()),
            licensing_config: Some(DriverLicensingConfigSpec {
                secret_name: Some(String::new()),
                ..DriverLicensingConfigSpec::default()
            }),
            ..DriverSpec::default()
        };
        assert_eq!(UserConfig::of(&driver), UserConfig::default());
        driver.licensing_config = Some(DriverLicensingConfigSpec {
            config_map_name: Some("grid".into()),
            nls_enabled: Some(true),
            ..DriverLicensingConfigSpec::default()
        });
        let licensing = UserConfig::of(&driver).licensing.unwrap();
        assert_eq!(licensing.config_map.as_deref(), Some("grid"));
        assert!(licensing.nls && licensing.secret.is_none());
    }
}
