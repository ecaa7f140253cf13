//! The validator's ServiceAccount.

use gpu_operator_core::{meta, operand::Operand as _};
use k8s_openapi::{api::core::v1::ServiceAccount, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DAEMONSET, Validation};

/// `nvidia-operator-validator`.
pub fn build() -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DAEMONSET.to_owned()),
            labels: Some(meta::labels(DAEMONSET, Validation::NAME)),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    }
}
