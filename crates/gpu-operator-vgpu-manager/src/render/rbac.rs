//! The vGPU manager's identity and permissions, as NVIDIA grants them: its k8s-driver-manager
//! init container reads and labels its node (pausing the GPU operands through their deploy
//! labels), finds and evicts the GPU pods and reads its DaemonSet before unloading a driver.
//! NVIDIA's OpenShift-only grants (the cluster version, `use` of the `privileged`
//! SecurityContextConstraints, hence its Role and RoleBinding) are left out, as for the driver:
//! this operator does not run on OpenShift, and it would have to hold them itself to grant them.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::ClusterRole;

use crate::{SERVICE_ACCOUNT, VgpuManager};

/// ServiceAccount, ClusterRole and binding are all `nvidia-vgpu-manager`.
pub const IDENTITY: Identity<'static> = Identity {
    name: SERVICE_ACCOUNT,
    component: VgpuManager::NAME,
};

/// ClusterRole `nvidia-vgpu-manager`: nodes get, list, patch, watch; pods get, list, watch;
/// evictions; DaemonSets get.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![
        rule("", &["nodes"], &["get", "list", "patch", "watch"]),
        rule("", &["pods"], &["get", "list", "watch"]),
        rule("", &["pods/eviction"], &["create"]),
        rule("apps", &["daemonsets"], &["get"]),
    ])
}
