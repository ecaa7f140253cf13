//! The `cc-manager` check: NVIDIA's confidential-computing (CC) manager has set the CC mode the
//! node asks for. As NVIDIA's validator: a node without `nvidia.com/cc.capable=true` has nothing
//! to check (it passes and writes `cc-manager-ready`); otherwise the CC manager must have written
//! `.cc-manager-ctr-ready` in the status directory (it does once it applied the mode). On top of
//! NVIDIA's, the mode the CC manager reports in `nvidia.com/cc.mode.state` must not be `failed`
//! and must be the one `nvidia.com/cc.mode` asks for (`on`, `off`, `devtools` or `ppcie`; an
//! unset label leaves the CC manager's default, so any reached mode passes). Unlike the other
//! sandbox components, NVIDIA's does not write `workload-type`, and neither does this one.

use std::{collections::BTreeMap, path::Path};

use gpu_operator_api::{
    labels::{CC_CAPABLE, CC_MODE, CC_MODE_STATE},
    validator::{reason, status_file},
};

use super::{Failed, Outcome, passed};

/// The modes NVIDIA's CC manager sets.
pub const CC_MODES: [&str; 4] = ["on", "off", "devtools", "ppcie"];
/// `nvidia.com/cc.mode.state` of a CC manager that could not set the mode.
const STATE_FAILED: &str = "failed";
/// `nvidia.com/cc.mode.state` of NVIDIA's earlier CC manager once the mode was set.
const STATE_SUCCESS: &str = "success";

/// Runs the check on the node's labels and the status directory.
pub fn check(labels: &BTreeMap<String, String>, output_dir: &Path) -> Outcome {
    let label = |key: &str| labels.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    if label(CC_CAPABLE) != Some("true") {
        return passed(
            reason::NOT_REQUIRED,
            format!("not a CC-capable node ({CC_CAPABLE} is not \"true\"): no CC mode to check"),
        );
    }
    let wanted = label(CC_MODE);
    if let Some(mode) = wanted.filter(|m| !CC_MODES.contains(m)) {
        return Err(Failed::permanent(
            reason::INVALID_CC_MODE,
            format!(
                "{CC_MODE}={mode:?} is not a CC mode: set the node label to one of {}",
                CC_MODES.join(", ")
            ),
        ));
    }
    let ready_file = output_dir.join(status_file::CC_MANAGER_CONTAINER_READY);
    if !ready_file.exists() {
        return Err(Failed::new(
            reason::CC_MANAGER_NOT_READY,
            format!(
                "NVIDIA's CC manager has not applied the CC mode yet: {} does not exist; check the nvidia-cc-manager pod on this node",
                ready_file.display()
            ),
        ));
    }
    let asked = wanted.map_or_else(
        || format!("the CC manager's default ({CC_MODE} is not set)"),
        |m| format!("{CC_MODE}={m}"),
    );
    match (label(CC_MODE_STATE), wanted) {
        (Some(STATE_FAILED), _) => Err(Failed::new(
            reason::CC_MODE_FAILED,
            format!(
                "the CC manager could not set the CC mode asked by {asked}: {CC_MODE_STATE}=failed; see the nvidia-cc-manager pod's log on this node"
            ),
        )),
        (Some(state), Some(mode)) if state != mode && state != STATE_SUCCESS => Err(Failed::new(
            reason::CC_MODE_MISMATCH,
            format!(
                "{CC_MODE}={mode} but the GPUs are in CC mode {state} ({CC_MODE_STATE}); the CC manager is still switching, or see its pod's log on this node"
            ),
        )),
        (Some(STATE_SUCCESS), _) => passed(
            reason::CC_MANAGER_VALIDATED,
            format!("CC mode set as asked by {asked} ({CC_MODE_STATE}=success)"),
        ),
        (Some(state), _) => passed(
            reason::CC_MANAGER_VALIDATED,
            format!("CC mode {state}, as asked by {asked}"),
        ),
        (None, _) => passed(
            reason::CC_MANAGER_VALIDATED,
            format!("the CC manager is ready ({asked}) and reported no mode in {CC_MODE_STATE}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::FileToWrite;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The status directory, with the CC manager's `.cc-manager-ctr-ready` when `ready`.
    fn validations(ready: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        if ready {
            std::fs::write(dir.path().join(".cc-manager-ctr-ready"), "").unwrap();
        }
        dir
    }

    #[test]
    fn a_node_that_is_not_cc_capable_passes_and_writes_its_file() {
        let dir = validations(false);
        for node in [labels(&[]), labels(&[("nvidia.com/cc.capable", "false")])] {
            let passed = check(&node, dir.path()).unwrap();
            assert_eq!(passed.reason, "NotRequired");
            assert_eq!(passed.file, FileToWrite::ComponentFile);
            assert_eq!(
                passed.message,
                "not a CC-capable node (nvidia.com/cc.capable is not \"true\"): no CC mode to check"
            );
        }
    }

    #[test]
    fn the_mode_asked_for_and_reached_passes() {
        let dir = validations(true);
        let node = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "on"),
            ("nvidia.com/cc.mode.state", "on"),
        ]);
        let passed = check(&node, dir.path()).unwrap();
        assert_eq!(passed.reason, "CCManagerValidated");
        assert_eq!(
            passed.message,
            "CC mode on, as asked by nvidia.com/cc.mode=on"
        );
        let default = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode.state", "off"),
        ]);
        assert_eq!(
            check(&default, dir.path()).unwrap().message,
            "CC mode off, as asked by the CC manager's default (nvidia.com/cc.mode is not set)"
        );
    }

    #[test]
    fn a_wrong_mode_is_reported_with_the_mode_found() {
        let dir = validations(true);
        let node = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "devtools"),
            ("nvidia.com/cc.mode.state", "on"),
        ]);
        let failed = check(&node, dir.path()).unwrap_err();
        assert_eq!(failed.reason, "CCModeMismatch");
        assert!(!failed.permanent);
        assert_eq!(
            failed.message,
            "nvidia.com/cc.mode=devtools but the GPUs are in CC mode on (nvidia.com/cc.mode.state); the CC manager is still switching, or see its pod's log on this node"
        );
    }

    #[test]
    fn a_failed_switch_fails() {
        let dir = validations(true);
        let node = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "on"),
            ("nvidia.com/cc.mode.state", "failed"),
        ]);
        let failed = check(&node, dir.path()).unwrap_err();
        assert_eq!(failed.reason, "CCModeFailed");
        assert_eq!(
            failed.message,
            "the CC manager could not set the CC mode asked by nvidia.com/cc.mode=on: nvidia.com/cc.mode.state=failed; see the nvidia-cc-manager pod's log on this node"
        );
    }

    #[test]
    fn the_cc_manager_must_be_ready_first() {
        let dir = validations(false);
        let node = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "on"),
        ]);
        let failed = check(&node, dir.path()).unwrap_err();
        assert_eq!(failed.reason, "CCManagerNotReady");
        assert_eq!(
            failed.message,
            format!(
                "NVIDIA's CC manager has not applied the CC mode yet: {}/.cc-manager-ctr-ready does not exist; check the nvidia-cc-manager pod on this node",
                dir.path().display()
            )
        );
    }

    #[test]
    fn an_invalid_mode_label_is_permanent_and_earlier_success_state_passes() {
        let dir = validations(true);
        let bad = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "maybe"),
        ]);
        let failed = check(&bad, dir.path()).unwrap_err();
        assert_eq!(failed.reason, "InvalidCCMode");
        assert!(failed.permanent);
        assert_eq!(
            failed.message,
            "nvidia.com/cc.mode=\"maybe\" is not a CC mode: set the node label to one of on, off, devtools, ppcie"
        );
        let earlier = labels(&[
            ("nvidia.com/cc.capable", "true"),
            ("nvidia.com/cc.mode", "on"),
            ("nvidia.com/cc.mode.state", "success"),
        ]);
        assert_eq!(
            check(&earlier, dir.path()).unwrap().message,
            "CC mode set as asked by nvidia.com/cc.mode=on (nvidia.com/cc.mode.state=success)"
        );
    }
}
