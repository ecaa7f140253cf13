//! Building blocks every component section shares: the image reference, container options
//! (resources, args, env) and environment variables.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a component's container image comes from. Flattened into each component, so the JSON
/// fields sit directly in the component's section (`spec.driver.repository`, ...).
///
/// Set either `image` alone (a full reference, used as is), or all of `repository`, `image` and
/// `version`; with none of them the operator uses its built-in default for the component.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Registry and path the image is pulled from, without the image name, such as
    /// `nvcr.io/nvidia`. Requires `image` and `version`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Image name, such as `k8s-device-plugin`. With `repository` and `version` unset this is
    /// the full image reference, used unchanged (for example `registry.local/driver@sha256:...`).
    #[serde(rename = "image", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"[a-zA-Z0-9\-]+"))]
    pub name: Option<String>,
    /// Image tag, such as `v0.17.0`, or a digest starting with `sha256:`. Requires `repository`
    /// and `image`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When the kubelet pulls the image: `Always`, `IfNotPresent` (the default) or `Never`.
    #[serde(rename = "imagePullPolicy", skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<String>,
    /// Names of Secrets in the operator's namespace used to pull the image from a private
    /// registry.
    #[serde(rename = "imagePullSecrets", skip_serializing_if = "Option::is_none")]
    pub pull_secrets: Option<Vec<String>>,
}

impl ImageSpec {
    /// `repository`, if set and not empty.
    #[must_use]
    pub fn repository(&self) -> Option<&str> {
        non_empty(self.repository.as_deref())
    }

    /// `image`, if set and not empty.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        non_empty(self.name.as_deref())
    }

    /// `version`, if set and not empty.
    #[must_use]
    pub fn version(&self) -> Option<&str> {
        non_empty(self.version.as_deref())
    }

    /// `imagePullPolicy`, if set and not empty.
    #[must_use]
    pub fn pull_policy(&self) -> Option<&str> {
        non_empty(self.pull_policy.as_deref())
    }

    /// The pull secrets, empty when unset.
    #[must_use]
    pub fn pull_secrets(&self) -> &[String] {
        self.pull_secrets.as_deref().unwrap_or_default()
    }

    /// Whether none of `repository`, `image` and `version` is set, so the operator's default
    /// image applies.
    #[must_use]
    pub fn is_unset(&self) -> bool {
        self.repository().is_none() && self.name().is_none() && self.version().is_none()
    }
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// Options of a component's main container. Flattened into each component section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerSpec {
    /// CPU and memory requests and limits, applied to every container of the component's pods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Arguments passed to the main container, replacing the component's default arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Environment variables set on the main container. They override the operator's own
    /// settings of the same name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
}

impl ContainerSpec {
    /// The arguments, empty when unset.
    #[must_use]
    pub fn args(&self) -> &[String] {
        self.args.as_deref().unwrap_or_default()
    }

    /// The environment variables, empty when unset.
    #[must_use]
    pub fn env(&self) -> &[EnvVar] {
        self.env.as_deref().unwrap_or_default()
    }
}

/// An environment variable with a literal value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// Name of the variable.
    pub name: String,
    /// Value of the variable; empty when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl EnvVar {
    /// A variable with a value.
    #[must_use]
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: Some(value.into()),
        }
    }
}

/// Compute resources of a container: the `limits` and `requests` of a Kubernetes container.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    /// Most of each resource the container may use, such as `cpu: 500m` or `memory: 1Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity_map")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Amount of each resource reserved for the container when it is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::quantity_map")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}
