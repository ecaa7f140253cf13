//! `nvidia-driver-startup-probe`: the script the driver container's startup probe runs. It passes
//! once the driver is usable on the node (module loaded, driver daemons ready, `nvidia-smi`
//! answers) and then records, in the validations directory, which optional modules the driver
//! was set up with, where the validator and the driver manager look for it.

use std::collections::BTreeMap;

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DAEMONSET, Driver, STARTUP_PROBE_CONFIG_MAP};

/// The key (and file name) of the script.
pub const SCRIPT_KEY: &str = "startup-probe.sh";

/// Our own script, with NVIDIA's checks and file names.
const SCRIPT: &str = r#"#!/bin/sh
# Startup probe of nvidia-driver-ctr: succeed only once the driver can serve GPUs.
set -eu

dir=/run/nvidia/validations
ready="$dir/.driver-ctr-ready"
daemons="$dir/.driver-daemons-status"
mkdir -p "$dir"

[ -f /sys/module/nvidia/refcnt ] || { echo "the nvidia kernel module is not loaded"; exit 1; }
if [ -f "$daemons" ]; then
  status=$(cat "$daemons")
  [ "$status" = "Ready" ] || { echo "driver daemons not ready: $status"; exit 1; }
fi
nvidia-smi || { echo "nvidia-smi failed"; exit 1; }

# Publish the optional module flags atomically.
printf 'GDRCOPY_ENABLED: %s\nGDS_ENABLED: %s\nGPU_DIRECT_RDMA_ENABLED: %s\n' \
  "${GDRCOPY_ENABLED:-false}" "${GDS_ENABLED:-false}" "${GPU_DIRECT_RDMA_ENABLED:-false}" \
  > "$ready.tmp"
mv "$ready.tmp" "$ready"
"#;

/// The ConfigMap.
pub fn startup_probe() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(STARTUP_PROBE_CONFIG_MAP.to_owned()),
            labels: Some(meta::labels(DAEMONSET, Driver::NAME)),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(SCRIPT_KEY.to_owned(), SCRIPT.to_owned())])),
        ..ConfigMap::default()
    }
}
