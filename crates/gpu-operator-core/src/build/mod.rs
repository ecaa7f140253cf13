//! Pure building blocks operands render with: finishing a pod into its DaemonSet ([`pod`],
//! [`daemonset`], [`placement`]) with a component's resolved settings ([`component`]) and the
//! settings every operand pod shares ([`shared`], [`barrier`], [`host_paths`],
//! [`runtime_class`]), [`image`] references, the labels and owner of every object ([`meta`]),
//! [`digest`]s that roll pods, identities and permissions ([`rbac`]), the optional Prometheus
//! Operator kinds ([`service_monitor`], [`prometheus_rule`]) and checked copies of the users'
//! ConfigMaps ([`user_config`]), and the DRA admin-access claim of a GPUCluster's monitoring pods
//! ([`admin_claim`]).

pub mod admin_claim;
pub mod barrier;
pub mod component;
pub mod daemonset;
pub mod digest;
pub mod host_paths;
pub mod image;
pub mod meta;
pub mod placement;
pub mod pod;
pub mod prometheus_rule;
pub mod rbac;
pub mod runtime_class;
pub mod service_monitor;
pub mod shared;
pub mod user_config;
