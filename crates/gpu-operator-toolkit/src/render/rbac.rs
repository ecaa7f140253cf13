//! The toolkit's identity and permissions, as NVIDIA grants them: list DaemonSets in the operator
//! namespace (the toolkit looks for the driver's), and use OpenShift's `privileged`
//! SecurityContextConstraints (inert elsewhere). No cluster-wide permission.

use gpu_operator_core::{
    operand::Operand as _,
    rbac::{Identity, rule},
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
    let mut scc = rule(
        "security.openshift.io",
        &["securitycontextconstraints"],
        &["use"],
    );
    scc.resource_names = Some(vec!["privileged".to_owned()]);
    IDENTITY.role(vec![scc, rule("apps", &["daemonsets"], &["list"])])
}
