//! The toolkit's identity and permissions, as NVIDIA grants them: list DaemonSets in the operator
//! namespace (the toolkit looks for the driver's). No cluster-wide permission. NVIDIA's `use` of
//! OpenShift's `privileged` SecurityContextConstraints is left out (no OpenShift support, and the
//! operator would have to hold it to grant it).

use gpu_operator_core::{
    build::rbac::{Identity, rule},
    contract::Operand as _,
};
use k8s_openapi::api::rbac::v1::Role;

use crate::{SERVICE_ACCOUNT, Toolkit};

/// ServiceAccount, Role and RoleBinding are all `nvidia-container-toolkit`.
pub const IDENTITY: Identity<'static> = Identity {
    name: SERVICE_ACCOUNT,
    component: Toolkit::NAME,
};

/// Role `nvidia-container-toolkit`.
pub fn role() -> Role {
    IDENTITY.role(vec![rule("apps", &["daemonsets"], &["list"])])
}
