//! NVIDIA's device plugin configuration, as the operands that read it share it: the device
//! plugin, its MPS control daemon and GPU Feature Discovery. A library, not an operand: the
//! device plugin and GFD crates both use it, and neither depends on the other.
//!
//! - [`checker`]: what the device plugin would refuse or ignore in a configuration file (a key of
//!   the ConfigMap `devicePlugin.config.name` names).
//! - [`config_manager`]: the checked copy of that ConfigMap and the config-manager containers
//!   that pick a node's configuration in the operands' pods.
//! - [`mig`]: the `MIG_STRATEGY` env those operands get from `spec.mig.strategy`.

pub mod checker;
pub mod config_manager;
pub mod mig;
