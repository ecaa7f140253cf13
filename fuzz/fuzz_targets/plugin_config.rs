//! A device plugin configuration file (a key of the ConfigMap `devicePlugin.config` names), as
//! text, through the checker that guards every operand mounting it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = gpu_operator_plugin_config::checker::check(text);
});
