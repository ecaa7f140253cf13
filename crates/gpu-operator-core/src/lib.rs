//! Shared plumbing of the operator's reconcilers. It knows Kubernetes and ClusterPolicy, but no
//! operand: each operand crate implements [`contract::Operand`], its pure `validate` and `render`
//! steps, which [`pipeline::operand`] runs. The modules, by what they are for:
//!
//! - [`contract`]: what an operand crate implements and gets (`Operand`, `Cluster`, `Children`,
//!   `Warning`).
//! - [`pipeline`]: the reconcile pipeline and its Controllers; writing children and status.
//! - [`cache`]: the shared caches, their change streams and the cluster facts.
//! - [`build`]: the pure parts operands render with: pods, DaemonSets, images, labels, RBAC.
//! - [`report`]: conditions, rollout progress, warnings and metrics.
//! - [`dra_api`]: the served version of `resource.k8s.io` and the conversions of the DRA kinds
//!   to and from it.
//! - [`context`] (the one [`Context`] every reconciler gets) and [`error`] (the one [`Error`]).

pub mod build;
pub mod cache;
pub mod context;
pub mod contract;
pub mod dra_api;
pub mod error;
#[cfg(any(test, feature = "testing"))]
pub mod fixtures;
pub mod pipeline;
pub mod report;

pub use context::Context;
pub use error::Error;
