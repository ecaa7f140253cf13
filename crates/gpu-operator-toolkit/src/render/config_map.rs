//! `nvidia-container-toolkit-entrypoint`: the toolkit container's entrypoint. It waits for the
//! validator's `driver-ready` file, exports what that file says about the driver (its root, host
//! or container driver), pauses briefly (containerd from 1.6.9 could signal a toolkit restarted
//! too soon after it restarted containerd) and runs the installer, `nvidia-toolkit`.

use std::collections::BTreeMap;

use gpu_operator_core::{build::meta, contract::Operand as _};
use k8s_openapi::{api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::ObjectMeta};

use crate::{DAEMONSET, ENTRYPOINT_CONFIG_MAP, Toolkit};

/// The key (and file name) of the script.
pub const SCRIPT_KEY: &str = "entrypoint.sh";

const SCRIPT: &str = r#"#!/bin/sh
# Entrypoint of nvidia-container-toolkit-ctr.
ready=/run/nvidia/validations/driver-ready
while [ ! -f "$ready" ]; do
  echo "waiting for the driver to be validated ($ready)"
  sleep 5
done

# Export the driver's location (IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT, ...) to the installer.
set -a
cat "$ready"
. "$ready"
set +a

# Give a freshly restarted containerd a moment before configuring it again.
sleep 5

exec nvidia-toolkit
"#;

/// The ConfigMap.
pub fn entrypoint() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(ENTRYPOINT_CONFIG_MAP.to_owned()),
            labels: Some(meta::labels(DAEMONSET, Toolkit::NAME)),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(SCRIPT_KEY.to_owned(), SCRIPT.to_owned())])),
        ..ConfigMap::default()
    }
}
