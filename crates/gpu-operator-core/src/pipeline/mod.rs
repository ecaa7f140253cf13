//! The reconcile pipeline every operand runs, written once: the validate → render → apply →
//! status steps of [`operand`] (over the [`crate::contract::Operand`] an operand crate
//! supplies), the Controllers that wake it ([`controller`], [`coalesce`]), which ClusterPolicy
//! is [`active`], how children are written ([`children`], [`apply`], with [`adopt`] and
//! [`takeover`] for what another operator left, and [`leftovers`] for what it left that we do
//! not render), and how conditions reach the ClusterPolicy status ([`status_write`],
//! [`write_gate`], [`status_batch`], with an operand's [`warning`]s).

pub mod active;
pub mod adopt;
pub mod apply;
pub mod children;
pub mod coalesce;
pub mod controller;
pub mod leftovers;
pub mod operand;
pub mod status_batch;
pub mod status_write;
pub mod takeover;
pub mod warning;
pub mod write_gate;
