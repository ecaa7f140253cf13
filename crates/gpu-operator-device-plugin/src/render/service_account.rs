//! The device plugin's ServiceAccount.

use gpu_operator_core::meta;
use k8s_openapi::{api::core::v1::ServiceAccount, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DevicePlugin, SERVICE_ACCOUNT};
use gpu_operator_core::operand::Operand as _;

/// `nvidia-device-plugin`.
pub fn build() -> ServiceAccount {
    ServiceAccount {
        metadata: ObjectMeta {
            name: Some(SERVICE_ACCOUNT.to_owned()),
            labels: Some(meta::labels(SERVICE_ACCOUNT, DevicePlugin::NAME)),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    }
}
