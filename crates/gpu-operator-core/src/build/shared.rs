//! [`Shared`]: the ClusterPolicy settings every operand pod shares, taken from the spec once by
//! an operand's validation, so that an operand's `Input` carries them instead of the raw
//! `ClusterPolicySpec` and its renderer reads only what it was given: the `daemonsets` section
//! (placement, tolerations, labels, update strategy), `hostPaths` (the host volume rewrites) and
//! `validator` (the settings of the validation barrier's init containers).

use gpu_operator_api::{
    ClusterPolicySpec,
    spec::{DaemonsetsSpec, HostPathsSpec, ValidatorSpec},
};

use crate::build::{
    host_paths,
    pod::{Barrier, HostPaths},
};

/// The settings every operand pod shares.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shared {
    /// `spec.daemonsets`, applied by [`crate::build::pod::Finished::into_daemonset`].
    pub daemonsets: DaemonsetsSpec,
    /// `spec.hostPaths`.
    pub host_paths: Option<HostPathsSpec>,
    /// `spec.validator`: pull policy, pull secrets, resources and env of the barrier's init
    /// containers.
    pub validator: Option<ValidatorSpec>,
}

impl Shared {
    /// The shared settings of `spec`.
    pub fn of(spec: &ClusterPolicySpec) -> Self {
        Self {
            daemonsets: spec.daemonsets.clone(),
            host_paths: spec.host_paths.clone(),
            validator: spec.validator.clone(),
        }
    }

    /// The barrier that adds the `toolkit-validation` init container run from
    /// `validator_image`.
    pub fn after_toolkit<'a>(&'a self, validator_image: &'a str) -> Barrier<'a> {
        Barrier::AfterToolkit {
            validator_image,
            validator: self.validator.as_ref(),
        }
    }

    /// The barrier whose `*-validation` init containers the operand placed itself.
    pub fn in_pod(&self) -> Barrier<'_> {
        Barrier::InPod {
            validator: self.validator.as_ref(),
        }
    }

    /// `hostPaths.rootFS`, or `/` when unset or empty.
    pub fn root_fs(&self) -> &str {
        self.host_path(|p| p.root_fs.as_deref(), host_paths::DEFAULT_ROOT_FS)
    }

    /// `hostPaths.driverInstallDir`, or `/run/nvidia/driver` when unset or empty.
    pub fn driver_install_dir(&self) -> &str {
        self.host_path(
            |p| p.driver_install_dir.as_deref(),
            host_paths::DEFAULT_DRIVER_INSTALL_DIR,
        )
    }

    fn host_path<'a>(
        &'a self,
        field: impl Fn(&'a HostPathsSpec) -> Option<&'a str>,
        default: &'static str,
    ) -> &'a str {
        self.host_paths
            .as_ref()
            .and_then(field)
            .filter(|path| !path.is_empty())
            .unwrap_or(default)
    }

    /// The `hostPaths` rewrite of the pod's host volumes.
    pub fn rewrite_host_paths(&self) -> HostPaths<'_> {
        HostPaths::Rewrite(self.host_paths.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_three_shared_sections_of_the_spec() {
        let mut spec = ClusterPolicySpec::default();
        spec.daemonsets.priority_class_name = Some("p".to_owned());
        spec.host_paths = Some(HostPathsSpec {
            root_fs: Some("/host".to_owned()),
            ..HostPathsSpec::default()
        });
        let mut validator = ValidatorSpec::default();
        validator.image.pull_policy = Some("Always".to_owned());
        spec.validator = Some(validator);
        let shared = Shared::of(&spec);
        assert_eq!(shared.daemonsets.priority_class_name.as_deref(), Some("p"));
        assert_eq!(
            shared.host_paths.as_ref().unwrap().root_fs.as_deref(),
            Some("/host")
        );
        assert!(matches!(
            shared.after_toolkit("v:1"),
            Barrier::AfterToolkit { validator_image: "v:1", validator: Some(v) }
                if v.image.pull_policy.as_deref() == Some("Always")
        ));
        assert_eq!(shared.root_fs(), "/host");
        assert_eq!(shared.driver_install_dir(), "/run/nvidia/driver");
        let empty = Shared::of(&ClusterPolicySpec::default());
        assert_eq!(empty, Shared::default());
        assert_eq!(
            (empty.root_fs(), empty.driver_install_dir()),
            ("/", "/run/nvidia/driver")
        );
    }
}
