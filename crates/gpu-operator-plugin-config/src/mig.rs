//! The MIG strategy env of the operands that see MIG devices (device plugin, MPS control daemon,
//! GPU Feature Discovery), by NVIDIA's rule: without `mig.strategy` only
//! `NVIDIA_MIG_MONITOR_DEVICES=all` (each node decides); with it `MIG_STRATEGY=<strategy>`, plus
//! `NVIDIA_MIG_MONITOR_DEVICES=all` unless the strategy is `none`. (Without `MIG_STRATEGY` the
//! components use `single`, the default of [`MigStrategy`].)

use gpu_operator_api::spec::{MigSpec, MigStrategy};

/// The env for `spec.mig`, as (name, value) pairs for
/// [`gpu_operator_core::build::daemonset::merge_env`].
pub fn strategy_env(mig: Option<&MigSpec>) -> Vec<(&'static str, String)> {
    let monitor = ("NVIDIA_MIG_MONITOR_DEVICES", "all".to_owned());
    match mig.and_then(|m| m.strategy) {
        None => vec![monitor],
        Some(MigStrategy::None) => vec![("MIG_STRATEGY", "none".to_owned())],
        Some(strategy) => vec![("MIG_STRATEGY", strategy.as_str().to_owned()), monitor],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(strategy: Option<MigStrategy>) -> Vec<(&'static str, String)> {
        strategy_env(Some(&MigSpec { strategy }))
    }

    #[test]
    fn no_strategy_only_monitors_none_only_sets_the_strategy_others_do_both() {
        assert_eq!(
            strategy_env(None),
            [("NVIDIA_MIG_MONITOR_DEVICES", "all".to_owned())]
        );
        assert_eq!(with(None), strategy_env(None));
        assert_eq!(
            with(Some(MigStrategy::None)),
            [("MIG_STRATEGY", "none".to_owned())]
        );
        assert_eq!(
            with(Some(MigStrategy::Mixed)),
            [
                ("MIG_STRATEGY", "mixed".to_owned()),
                ("NVIDIA_MIG_MONITOR_DEVICES", "all".to_owned())
            ]
        );
    }
}
