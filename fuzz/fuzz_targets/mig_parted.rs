//! A mig-parted configuration file (the ConfigMap `migManager.config` names), as text, through the
//! MIG manager's reading of its layouts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = gpu_operator_mig_manager::layouts(text);
});
