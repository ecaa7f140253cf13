//! `spec.mig` and `spec.migManager`: Multi-Instance GPU.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ContainerSpec, ImageSpec};

/// How MIG devices are advertised.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigSpec {
    /// MIG strategy of the device plugin and GPU Feature Discovery: `none` (MIG devices are not
    /// advertised), `single` (all MIG devices of a node have the same profile and appear as
    /// `nvidia.com/gpu`) or `mixed` (each profile is its own resource, such as
    /// `nvidia.com/mig-1g.10gb`). Unset leaves the strategy to the components, which use
    /// `single` (as NVIDIA's chart sets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<MigStrategy>,
}

/// MIG strategy. Its `Default` is the one rule for an unset `mig.strategy`: `single`, what the
/// device plugin and GFD use without `MIG_STRATEGY` and what the validator's plugin check
/// expects (see [`MigStrategy::of`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigStrategy {
    /// MIG devices are not advertised.
    None,
    /// All MIG devices of a node share one profile and appear as `nvidia.com/gpu`. The default.
    #[default]
    Single,
    /// Each MIG profile is its own resource, such as `nvidia.com/mig-1g.10gb`.
    Mixed,
}

impl MigStrategy {
    /// The strategy the components run with for `spec.mig`: the one set, else the default.
    #[must_use]
    pub fn of(mig: Option<&MigSpec>) -> Self {
        mig.and_then(|m| m.strategy).unwrap_or_default()
    }

    /// The value as written in the ClusterPolicy and in the `MIG_STRATEGY` env variable.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Single => "single",
            Self::Mixed => "mixed",
        }
    }
}

impl std::str::FromStr for MigStrategy {
    type Err = String;

    /// Parses the value of `MIG_STRATEGY` (`none`, `single`, `mixed`; case matters, as for the
    /// device plugin); the error is the value refused.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        [Self::None, Self::Single, Self::Mixed]
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| value.to_owned())
    }
}

/// The MIG manager.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::enabled_by_default)]
pub struct MigManagerSpec {
    /// Deploy the MIG manager on MIG-capable nodes. It applies the MIG layout named by a node's
    /// `nvidia.com/mig.config` label and reports progress in `nvidia.com/mig.config.state`.
    /// Defaults to true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Image of the MIG manager.
    #[serde(flatten)]
    pub image: ImageSpec,
    /// Options of the MIG manager container, for example env `WITH_REBOOT`.
    #[serde(flatten)]
    pub container: ContainerSpec,
    /// Run the MIG manager pods in the node's network namespace. Defaults to false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_network: Option<bool>,
    /// The MIG layouts the manager can apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<MigPartedConfigSpec>,
    /// Host services that use the GPUs and must stop while the MIG layout changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_clients_config: Option<MigGpuClientsConfigSpec>,
    /// Ours, not in NVIDIA's API: what the operator does about a node whose MIG reconfiguration
    /// failed (`nvidia.com/mig.config.state=failed`) or has been `pending` or `rebooting` for
    /// longer than `timeoutSeconds`. It always reports the node (`MIGManagerReady`, an Event, a
    /// metric).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<MigWatchdogSpec>,
}

/// The MIG watchdog (ours).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigWatchdogSpec {
    /// Seconds a node may stay `pending` or `rebooting` before it is reported as stuck.
    /// Defaults to 1800.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<u32>,
    /// What to do once a node failed or is stuck, besides reporting it: `retry` (default)
    /// restarts the node's MIG manager once, which applies the layout again, but only while no
    /// pod on the node uses its GPUs; `restoreClients` sets the GPU operands the MIG manager
    /// paused (`paused-for-mig-change`) back to `true`, so the node offers its GPUs as they are;
    /// `report` does nothing more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<MigRecovery>,
}

/// What the MIG watchdog does about a failed or stuck node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MigRecovery {
    /// Report only.
    Report,
    /// Restore the paused GPU operands' deploy labels.
    RestoreClients,
    /// Restart the node's MIG manager once, when no pod uses the node's GPUs.
    #[default]
    Retry,
}

impl MigWatchdogSpec {
    /// The timeout when unset.
    pub const DEFAULT_TIMEOUT_SECONDS: u32 = 1800;

    /// The timeout of `spec` (the default when unset).
    #[must_use]
    pub fn timeout(spec: Option<&Self>) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            spec.and_then(|w| w.timeout_seconds)
                .unwrap_or(Self::DEFAULT_TIMEOUT_SECONDS),
        ))
    }

    /// The recovery of `spec` (the default when unset).
    #[must_use]
    pub fn recovery(spec: Option<&Self>) -> MigRecovery {
        spec.and_then(|w| w.recovery).unwrap_or_default()
    }
}

impl MigManagerSpec {
    /// The MIG layout seeded as `nvidia.com/mig.config` on MIG-capable nodes without that label:
    /// `config.default`, or [`MigPartedConfigSpec::DEFAULT_LAYOUT`] when unset; `None` when it is
    /// set empty (no label is seeded). Whether the manager is enabled is the caller's question.
    #[must_use]
    pub fn seeded_layout(&self) -> Option<&str> {
        let layout = self
            .config
            .as_ref()
            .and_then(|c| c.default.as_deref())
            .unwrap_or(MigPartedConfigSpec::DEFAULT_LAYOUT);
        (!layout.is_empty()).then_some(layout)
    }
}

/// MIG layouts of the MIG manager.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::cel::mig_parted_config)]
pub struct MigPartedConfigSpec {
    /// Name of a ConfigMap in the operator's namespace whose key `config.yaml` is a mig-parted
    /// configuration (`version: v1`, `mig-configs: {...}`). Unset: the manager derives the
    /// layouts from the hardware, falling back to `default-mig-parted-config`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// MIG layout set as `nvidia.com/mig.config` on MIG-capable nodes that have no such label,
    /// for example `all-disabled` (the default) or `all-1g.10gb`; empty sets no label. Must be a
    /// valid label value.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = MigPartedConfigSpec::DEFAULT_LAYOUT), length(max = 63))]
    pub default: Option<String>,
}

impl MigPartedConfigSpec {
    /// The MIG layout seeded when `default` is unset: every GPU without MIG. The one copy of this
    /// default in Rust (the CRD schema, the operand, the labeller and the validator use it; the
    /// chart's `values.yaml` repeats it as data, and a test compares the two).
    pub const DEFAULT_LAYOUT: &'static str = "all-disabled";
}

/// Host GPU clients of the MIG manager.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigGpuClientsConfigSpec {
    /// Name of a ConfigMap in the operator's namespace listing the systemd services to stop
    /// during a MIG change. Defaults to `default-gpu-clients`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_strategy_is_single_and_the_env_values_parse_back() {
        // NVIDIA's chart sets `mig.strategy: single`; the device plugin's own default is the same.
        assert_eq!(MigStrategy::of(None), MigStrategy::Single);
        assert_eq!(
            MigStrategy::of(Some(&MigSpec::default())),
            MigStrategy::Single
        );
        let mixed = MigSpec {
            strategy: Some(MigStrategy::Mixed),
        };
        assert_eq!(MigStrategy::of(Some(&mixed)), MigStrategy::Mixed);
        for (text, strategy) in [
            ("none", MigStrategy::None),
            ("single", MigStrategy::Single),
            ("mixed", MigStrategy::Mixed),
        ] {
            assert_eq!(text.parse(), Ok(strategy));
        }
        assert_eq!("MIXED".parse::<MigStrategy>(), Err("MIXED".to_owned()));
    }
}
