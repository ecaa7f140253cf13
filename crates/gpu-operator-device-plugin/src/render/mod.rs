//! The device plugin's objects, one file per kind.

mod daemonset;
mod service_account;

use gpu_operator_core::operand::Children;

use crate::Input;

/// Everything the device plugin needs.
pub fn children(input: &Input) -> Children {
    Children {
        service_accounts: vec![service_account::build()],
        daemonsets: vec![daemonset::build(input)],
        ..Children::default()
    }
}
