//! The vGPU device manager's identity and permissions, as NVIDIA grants them: on nodes, read its
//! own and update its labels (`nvidia.com/vgpu.config.state`, and the sandbox device plugin's and
//! sandbox validator's `nvidia.com/gpu.deploy.*` gates, paused during a change; the chart's
//! node-agent policy holds it to those labels of its own node); in the operator namespace, read
//! pods (it waits for the paused operands' pods to go). NVIDIA's OpenShift-only grants (the
//! cluster version, `use` of the `privileged` SecurityContextConstraints) are left out: this
//! operator does not run on OpenShift, and it would have to hold them itself to grant them.

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

use crate::{NAME, VgpuDeviceManager};

/// The ServiceAccount, roles and bindings share the DaemonSet's name.
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: VgpuDeviceManager::NAME,
};

/// ClusterRole `nvidia-vgpu-device-manager`: nodes get, list, watch, update.
pub fn cluster_role() -> ClusterRole {
    IDENTITY.cluster_role(vec![rule(
        "",
        &["nodes"],
        &["get", "list", "watch", "update"],
    )])
}

/// Role `nvidia-vgpu-device-manager`: pods get, list, watch.
pub fn role() -> Role {
    IDENTITY.role(vec![rule("", &["pods"], &["get", "list", "watch"])])
}
