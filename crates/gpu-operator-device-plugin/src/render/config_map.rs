//! `nvidia-device-plugin-entrypoint`: the plugin container's entrypoint (our script, NVIDIA's
//! behaviour). It waits for the validator's `driver-ready` file and exports its settings
//! (`NVIDIA_DRIVER_ROOT`, …), turns on GDRCopy and GDS/MOFED support when their kernel modules
//! are loaded and the user did not decide, then starts `nvidia-device-plugin`.

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DevicePlugin, ENTRYPOINT_CONFIG_MAP};

/// The key of the script, mounted at `/bin/entrypoint.sh`.
pub const KEY: &str = "entrypoint.sh";

const SCRIPT: &str = r#"#!/bin/sh
# Written by gpu-operator: start the NVIDIA device plugin once the driver is validated.
ready=/run/nvidia/validations/driver-ready
while [ ! -f "$ready" ]; do
  echo "device plugin: waiting for $ready"
  sleep 5
done
set -a
. "$ready"
loaded() { lsmod | grep -q "^$1 "; }
if loaded gdrdrv && [ -z "$GDRCOPY_ENABLED" ]; then GDRCOPY_ENABLED=true; fi
if loaded nvidia_fs; then
  [ -z "$GDS_ENABLED" ] && GDS_ENABLED=true
  [ -z "$MOFED_ENABLED" ] && MOFED_ENABLED=true
fi
set +a
echo "device plugin: starting nvidia-device-plugin"
exec nvidia-device-plugin
"#;

/// The ConfigMap.
pub fn build() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ENTRYPOINT_CONFIG_MAP.to_owned()),
            labels: Some(meta::labels(crate::DAEMONSET, DevicePlugin::NAME)),
            ..ObjectMeta::default()
        },
        data: Some([(KEY.to_owned(), SCRIPT.to_owned())].into()),
        ..ConfigMap::default()
    }
}
