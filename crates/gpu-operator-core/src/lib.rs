//! Shared plumbing of the operator's reconcilers. It knows Kubernetes and ClusterPolicy, but no
//! operand: each operand crate plugs its pure `validate` and `render` steps into [`operand`].

pub mod active;
pub mod adopt;
pub mod apply;
pub mod barrier;
pub mod change_stream;
pub mod children;
pub mod coalesce;
pub mod conditions;
pub mod context;
pub mod controller;
pub mod daemonset;
pub mod deprecated;
pub mod digest;
pub mod error;
pub mod exposition;
pub mod facts;
pub mod facts_memo;
#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
pub mod host_paths;
pub mod image;
pub mod labeller_wait;
pub mod leftovers;
pub mod meta;
pub mod metrics;
pub mod node_meta;
pub mod node_runtime;
pub mod operand;
pub mod placement;
pub mod pod;
pub mod pod_install;
pub mod pod_summary;
pub mod problems;
mod projection;
pub mod prometheus_rule;
pub mod rbac;
pub mod readiness;
mod rollout_condition;
pub mod runtime_class;
pub mod service_monitor;
pub mod shared;
pub mod status_write;
pub mod stores;
pub mod takeover;
pub mod user_config;
pub mod warned;
pub mod write_gate;

pub use context::Context;
pub use error::Error;
