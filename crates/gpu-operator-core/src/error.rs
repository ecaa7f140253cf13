//! The reconcilers' error type and its categories, used as Event reasons and metric labels.

use crate::build::image::ImageError;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ClusterPolicy cannot be satisfied as written; retried only when it changes.
    #[error("invalid ClusterPolicy: {0}")]
    InvalidSpec(String),
    /// A ConfigMap the ClusterPolicy references is missing or holds a configuration its operand
    /// would reject; retried when the ConfigMap or the ClusterPolicy changes.
    #[error("{0}")]
    InvalidConfig(String),
    /// A prerequisite of the operand outside its spec is not met (the API server's version, an API
    /// it must serve): nothing is rendered, the condition says `reason` (a PascalCase reason of
    /// the operand's own, listed in the troubleshooting page) and `message` names the fix;
    /// retried when the owner changes.
    #[error("{message}")]
    Unmet {
        /// The condition's reason, such as `DRAAPIUnavailable`.
        reason: &'static str,
        /// What is missing and the fix.
        message: String,
    },
    /// No image could be resolved for a component.
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The API server refused or failed a request; retried with backoff.
    #[error("{action}: {source}")]
    Kube {
        /// What we were doing, such as "applying DaemonSet nvidia-device-plugin-daemonset".
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A rendered object could not be serialized.
    #[error("serializing {what}: {source}")]
    Serialize {
        /// The object.
        what: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    /// A short PascalCase category: the Event reason and the `error` metric label.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidSpec(_) => "InvalidSpec",
            Self::InvalidConfig(_) => "InvalidConfig",
            Self::Unmet { reason, .. } => reason,
            Self::Image(_) => "ImageUnresolvable",
            Self::Kube { .. } => "ApiError",
            Self::Serialize { .. } => "RenderFailed",
        }
    }

    /// Whether retrying without a change to the ClusterPolicy can help.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Kube { .. })
    }

    /// Wraps a client error with what we were doing.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}
