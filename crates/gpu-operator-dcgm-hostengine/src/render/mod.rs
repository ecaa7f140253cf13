//! DCGM's objects, one file per kind.

mod daemonset;
mod service;

use gpu_operator_core::{
    build::rbac::Identity,
    contract::{Children, Operand as _},
};

use crate::{Dcgm, Input, NAME};

/// The ServiceAccount shares the DaemonSet's name. (NVIDIA's Role only lets it use OpenShift's
/// privileged SCC, which does not apply here.)
pub const IDENTITY: Identity<'static> = Identity {
    name: NAME,
    component: Dcgm::NAME,
};

/// Everything DCGM needs.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![IDENTITY.service_account()],
        services: vec![service::build()],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
