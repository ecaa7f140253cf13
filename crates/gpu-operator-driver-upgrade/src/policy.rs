//! `driver.upgradePolicy` resolved with NVIDIA's defaults (reference §2.2: maxParallelUpgrades 1,
//! maxUnavailable 25%, pod deletion and drain timeouts 300 s, waitForCompletion 0 = forever), plus
//! the timeouts of the states NVIDIA's fields do not cover.

use std::time::Duration;

use gpu_operator_api::spec::DriverUpgradePolicySpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use gpu_operator_core::build::runtime_class;

use crate::{
    facts::Workload,
    selector::{BadSelector, Selector},
};

/// How long the node's validator pod may take to be Ready on the new driver (NVIDIA's 600 s).
pub const VALIDATION_TIMEOUT: Duration = Duration::from_secs(600);
/// How long the new driver pod may take to be Ready: the driver's startup probe allows 60 s plus
/// 120 × 10 s to build and load the modules; ten more minutes for the image pull.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(1860);

/// The upgrade policy with every default applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `autoUpgrade`.
    pub auto_upgrade: bool,
    /// `maxParallelUpgrades`; 0 = no limit.
    pub max_parallel: usize,
    /// `maxUnavailable` as written.
    pub max_unavailable: IntOrString,
    /// `waitForCompletion.podSelector`; `None` waits for nothing.
    pub wait_selector: Option<Selector>,
    /// `waitForCompletion.timeoutSeconds`; `None` waits forever.
    pub wait_timeout: Option<Duration>,
    /// `podDeletion` (the chart's `gpuPodDeletion`).
    pub deletion: Removal,
    /// `podDeletion.podSelector` (ours): more pods that count as GPU users.
    pub user_selector: Option<Selector>,
    /// `drain`, when `drain.enable`.
    pub drain: Option<Drain>,
    /// The NVIDIA runtime classes (see [`Policy::with_gpu_users`]): a pod running under one is
    /// a GPU user even without a device request.
    pub runtime_classes: Vec<String>,
    /// The operator's namespace: its pods (the operands, the validator's workloads) are not the
    /// upgrade's to evict or name — the driver manager in the new driver pod moves them.
    pub operator_namespace: String,
}

/// How pods are removed from a node (GPU pod deletion or drain).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    /// `force`: also pods without a controller.
    pub force: bool,
    /// `deleteEmptyDir`: also pods with emptyDir volumes.
    pub delete_empty_dir: bool,
    /// `timeoutSeconds`; `None` waits forever.
    pub timeout: Option<Duration>,
}

/// `drain` when enabled.
#[derive(Clone, Debug, PartialEq)]
pub struct Drain {
    /// Which pods are drained; always excludes the drain-skip label.
    pub selector: Selector,
    /// Force, emptyDir and timeout.
    pub removal: Removal,
}

/// A policy value the operator cannot act on (CEL refuses most of them at apply time).
#[derive(Debug, thiserror::Error)]
pub enum InvalidPolicy {
    /// A pod selector that does not parse.
    #[error(
        "driver.upgradePolicy.{field}: {source}; write it as `kubectl get pods -l` takes it, such as app=training"
    )]
    Selector {
        /// The field.
        field: &'static str,
        /// The parse error.
        source: BadSelector,
    },
    /// A maxUnavailable that is neither a count nor a percentage.
    #[error(
        "driver.upgradePolicy.maxUnavailable {0:?} is neither a number of nodes nor a percentage such as \"25%\""
    )]
    MaxUnavailable(String),
}

fn seconds(value: Option<i64>, default: i64) -> Option<Duration> {
    match value.unwrap_or(default) {
        n if n <= 0 => None,
        n => Some(Duration::from_secs(n.unsigned_abs())),
    }
}

fn selector(field: &'static str, text: Option<&str>) -> Result<Option<Selector>, InvalidPolicy> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(text) => Selector::parse(text)
            .map(Some)
            .map_err(|source| InvalidPolicy::Selector { field, source }),
    }
}

impl Policy {
    /// `spec` (absent: every default) resolved.
    pub fn resolve(spec: Option<&DriverUpgradePolicySpec>) -> Result<Self, InvalidPolicy> {
        let spec = spec.cloned().unwrap_or_default();
        let deletion = spec.pod_deletion.unwrap_or_default();
        let wait = spec.wait_for_completion.unwrap_or_default();
        let drain = spec.drain.unwrap_or_default();
        let max_unavailable = spec
            .max_unavailable
            .unwrap_or_else(|| IntOrString::String("25%".into()));
        // Checked here so a bad value is named before any node moves.
        unavailable_limit(&max_unavailable, 1)?;
        let drain = if drain.enable.unwrap_or(false) {
            let selector = selector("drain.podSelector", drain.pod_selector.as_deref())?
                .unwrap_or_default()
                .and_not(gpu_operator_api::labels::DRIVER_UPGRADE_DRAIN_SKIP, "true");
            Some(Drain {
                selector,
                removal: Removal {
                    force: drain.force.unwrap_or(false),
                    delete_empty_dir: drain.delete_empty_dir.unwrap_or(false),
                    timeout: seconds(drain.timeout_seconds, 300),
                },
            })
        } else {
            None
        };
        Ok(Self {
            auto_upgrade: spec.auto_upgrade.unwrap_or(false),
            max_parallel: usize::try_from(spec.max_parallel_upgrades.unwrap_or(1).max(0))
                .unwrap_or(usize::MAX),
            max_unavailable,
            wait_selector: selector(
                "waitForCompletion.podSelector",
                wait.pod_selector.as_deref(),
            )?,
            wait_timeout: seconds(wait.timeout_seconds, 0),
            user_selector: selector("podDeletion.podSelector", deletion.pod_selector.as_deref())?,
            deletion: Removal {
                force: deletion.force.unwrap_or(false),
                delete_empty_dir: deletion.delete_empty_dir.unwrap_or(false),
                timeout: seconds(deletion.timeout_seconds, 300),
            },
            drain,
            runtime_classes: Vec::new(),
            operator_namespace: String::new(),
        })
    }

    /// This policy, with what tells a GPU user: the runtime classes the toolkit makes for `spec`
    /// (`operator.runtimeClass` or `nvidia`, `nvidia-cdi`, `nvidia-legacy`), and the operator's
    /// namespace, whose pods are not workloads.
    #[must_use]
    pub fn with_gpu_users(
        mut self,
        spec: &gpu_operator_api::ClusterPolicySpec,
        operator_namespace: &str,
    ) -> Self {
        operator_namespace.clone_into(&mut self.operator_namespace);
        self.runtime_classes = [
            runtime_class::configured_name(spec),
            runtime_class::CDI_RUNTIME_CLASS,
            runtime_class::LEGACY_RUNTIME_CLASS,
        ]
        .map(str::to_owned)
        .to_vec();
        self
    }

    /// Why `workload` holds the GPUs (see [`Workload::gpu_use`]), or matches
    /// `podDeletion.podSelector`; `None` for the operator's own pods and for pods that do not.
    pub fn gpu_use(&self, workload: &Workload) -> Option<String> {
        if workload.namespace == self.operator_namespace {
            return None;
        }
        workload.gpu_use(&self.runtime_classes).or_else(|| {
            let selected = self
                .user_selector
                .as_ref()
                .is_some_and(|s| s.matches(&workload.labels));
            (selected && !workload.finished).then(|| "podDeletion.podSelector".to_owned())
        })
    }

    /// Whether `workload` is a workload that holds the GPUs, not one of the operator's own pods.
    pub fn gpu_user(&self, workload: &Workload) -> bool {
        self.gpu_use(workload).is_some()
    }

    /// How a GPU user is named: `namespace/name`, and why it counts when it requests nothing.
    pub fn name_gpu_user(&self, workload: &Workload) -> String {
        match self.gpu_use(workload) {
            Some(why) if !why.is_empty() => format!("{} ({why})", workload.key()),
            _ => workload.key(),
        }
    }

    /// How many of `total` GPU nodes may be unavailable at once.
    pub fn max_unavailable(&self, total: usize) -> usize {
        unavailable_limit(&self.max_unavailable, total).unwrap_or(0)
    }
}

/// `value` of `total`: a count, or a percentage rounded up (as NVIDIA's operator rounds it).
fn unavailable_limit(value: &IntOrString, total: usize) -> Result<usize, InvalidPolicy> {
    let bad = || InvalidPolicy::MaxUnavailable(format!("{value:?}"));
    match value {
        IntOrString::Int(n) => usize::try_from(*n).map_err(|_| bad()),
        IntOrString::String(text) => {
            let text = text.trim();
            if let Some(percent) = text.strip_suffix('%') {
                let percent: usize = percent.trim().parse().map_err(|_| bad())?;
                if percent > 100 {
                    return Err(bad());
                }
                Ok((total * percent).div_ceil(100))
            } else {
                text.parse().map_err(|_| bad())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::{DrainSpec, PodDeletionSpec, WaitForCompletionSpec};

    use super::*;

    #[test]
    fn an_absent_policy_has_nvidias_defaults() {
        let p = Policy::resolve(None).unwrap();
        assert!(!p.auto_upgrade);
        assert_eq!(p.max_parallel, 1);
        assert_eq!(p.max_unavailable(100), 25);
        assert_eq!(p.wait_selector, None);
        assert_eq!(p.wait_timeout, None);
        assert_eq!(
            p.deletion,
            Removal {
                force: false,
                delete_empty_dir: false,
                timeout: Some(Duration::from_secs(300)),
            }
        );
        assert!(p.drain.is_none());
    }

    #[test]
    fn max_unavailable_percentages_round_up() {
        // NVIDIA rounds up: 25% of 1,000 is 250, of 13 is 4 (3.25), 1% of 12 is 1.
        for (value, total, limit) in [
            (IntOrString::String("25%".into()), 1000, 250),
            (IntOrString::String("25%".into()), 13, 4),
            (IntOrString::String("1%".into()), 12, 1),
            (IntOrString::String("0%".into()), 12, 0),
            (IntOrString::String("100%".into()), 12, 12),
            (IntOrString::Int(3), 12, 3),
            (IntOrString::String("3".into()), 12, 3),
        ] {
            let spec = DriverUpgradePolicySpec {
                max_unavailable: Some(value.clone()),
                ..DriverUpgradePolicySpec::default()
            };
            assert_eq!(
                Policy::resolve(Some(&spec)).unwrap().max_unavailable(total),
                limit,
                "{value:?}"
            );
        }
    }

    #[test]
    fn every_field_is_read() {
        let spec = DriverUpgradePolicySpec {
            auto_upgrade: Some(true),
            max_parallel_upgrades: Some(0),
            max_unavailable: Some(IntOrString::Int(2)),
            pod_deletion: Some(PodDeletionSpec {
                force: Some(true),
                timeout_seconds: Some(0),
                delete_empty_dir: Some(true),
                pod_selector: Some("app=vllm".into()),
            }),
            wait_for_completion: Some(WaitForCompletionSpec {
                pod_selector: Some("app=training".into()),
                timeout_seconds: Some(60),
            }),
            drain: Some(DrainSpec {
                enable: Some(true),
                force: Some(true),
                pod_selector: Some("tier=gpu".into()),
                timeout_seconds: Some(30),
                delete_empty_dir: Some(true),
            }),
        };
        let p = Policy::resolve(Some(&spec)).unwrap();
        assert!(p.auto_upgrade);
        assert_eq!(p.max_parallel, 0);
        assert_eq!(p.max_unavailable(100), 2);
        assert_eq!(p.wait_timeout, Some(Duration::from_secs(60)));
        assert_eq!(p.deletion.timeout, None, "0 waits forever");
        assert!(p.deletion.force && p.deletion.delete_empty_dir);
        let drain = p.drain.clone().unwrap();
        assert_eq!(drain.removal.timeout, Some(Duration::from_secs(30)));
        let labels = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(drain.selector.matches(&labels(&[("tier", "gpu")])));
        let vllm = Workload {
            namespace: "ml".into(),
            name: "vllm-0".into(),
            labels: labels(&[("app", "vllm")]),
            ..Workload::default()
        };
        assert_eq!(
            p.name_gpu_user(&vllm),
            "ml/vllm-0 (podDeletion.podSelector)"
        );
        let finished = Workload {
            finished: true,
            ..vllm
        };
        assert!(!p.gpu_user(&finished), "a finished pod holds nothing");
        assert!(!drain.selector.matches(&labels(&[
            ("tier", "gpu"),
            ("nvidia.com/gpu-driver-upgrade-drain.skip", "true")
        ])));
    }

    #[test]
    fn a_bad_selector_names_the_field() {
        let spec = DriverUpgradePolicySpec {
            wait_for_completion: Some(WaitForCompletionSpec {
                pod_selector: Some("app in training".into()),
                timeout_seconds: None,
            }),
            ..DriverUpgradePolicySpec::default()
        };
        let error = Policy::resolve(Some(&spec)).unwrap_err().to_string();
        assert!(
            error.contains("driver.upgradePolicy.waitForCompletion.podSelector"),
            "{error}"
        );
    }
}
