//! The shared caches and what is computed from them: one reflector per watched kind
//! ([`stores`]) with its [`change_stream`]s, the narrow projections the big kinds are cached as
//! ([`node_meta`] with its `node_labels`, [`node_runtime`], [`pod_install`], [`pod_summary`],
//! [`resource_slice`], declared with the `projection!` macro), the cluster [`facts`] every
//! reconciler reads ([`facts_memo`], [`labeller_wait`]), and the API server's [`server_facts`].

pub mod change_stream;
pub mod facts;
pub mod facts_memo;
pub mod labeller_wait;
mod node_labels;
pub mod node_meta;
pub mod node_runtime;
pub mod pod_install;
pub mod pod_summary;
mod projection;
pub mod resource_slice;
pub mod server_facts;
pub mod stores;
