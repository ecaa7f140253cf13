//! What the reconcilers say about what they did: `metav1.Condition`s ([`conditions`]), Events
//! about things that happen once ([`one_off_events`]), an operand's condition while it rolls
//! out ([`rollout_condition`], from [`readiness`] and the [`problems`] of its nodes), warnings
//! published once ([`warned`], [`deprecated`] fields), and the Prometheus [`metrics`] with a
//! reader of their text format ([`exposition`]).

pub mod conditions;
pub mod deprecated;
pub mod exposition;
pub mod metrics;
pub mod one_off_events;
pub mod problems;
pub mod readiness;
pub(crate) mod rollout_condition;
pub mod warned;
