//! The pods the validator creates itself — the CUDA and the device plugin workload pods — built by
//! the validator's own code from the environment the operator renders on its `cuda-validation`
//! and `plugin-validation` containers, as the validator would build them on a node.

use std::{collections::BTreeMap, ffi::OsString};

use gpu_operator_validator::{
    components::{cuda, plugin},
    config::{self, Invocation},
};
use serde_json::Value;

use super::contract;

/// The workload pod's container for the validator container `container` (named `name`), or why
/// the validator would build none.
pub fn workload_container(name: &str, container: &Value) -> Result<Value, String> {
    let env: BTreeMap<String, String> = contract::env_of(container);
    let args = contract::strings(&container["args"]);
    let config = match config::parse(&args, |var| env.get(var).map(OsString::from)) {
        Ok(Invocation::Run(config)) => config,
        other => {
            return Err(format!(
                "{name}: the validator does not run a check: {other:?}"
            ));
        }
    };
    let pod = match name {
        "cuda-validation" => cuda::pod(&config, None),
        "plugin-validation" => plugin::pod(&config, "nvidia.com/gpu".to_owned(), None),
        _ => return Err(format!("{name} starts no workload pod")),
    }
    .map_err(|failed| format!("{name}: {}: {}", failed.reason, failed.message))?;
    let value = serde_json::to_value(pod).map_err(|e| e.to_string())?;
    Ok(value["spec"]["containers"][0].clone())
}
