//! The operand contract: what an operand crate implements ([`Operand`]: its names and its pure
//! validate and render steps), the custom resource that owns it ([`Owner`]), what validation may know besides the spec ([`Cluster`]), what
//! rendering returns ([`Children`]) and what an operand reports without stopping its rollout
//! ([`Warning`]). The pipeline that runs an operand is in [`crate::pipeline`]; the parts operands
//! render with are in [`crate::build`].

mod children;
mod cluster;
mod operand;
mod owner;
mod warning;

pub use children::Children;
pub use cluster::Cluster;
pub use operand::{ImageEnv, Operand, Summary};
pub use owner::Owner;
pub use warning::Warning;
