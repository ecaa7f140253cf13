//! The version of `resource.k8s.io` (Dynamic Resource Allocation) the operator reads and writes
//! the DRA kinds at: `v1`, else `v1beta2` where the API server serves only the betas (an admin
//! turned `v1` off: `--runtime-config=resource.k8s.io/v1=false,resource.k8s.io/v1beta2=true`).
//! `v1beta2` has the schema of `v1` (`v1` is `v1beta2` promoted), so an object is the same JSON
//! at both, its `apiVersion` aside; `v1beta1` differs (no `exactly` in claim requests, devices'
//! attributes under `basic`) and is not used: a server serving only it is refused.
//!
//! Every cache and every rendered object stays typed `v1`; only the edges convert: the watches of
//! the DRA caches ([`crate::cache::stores`]) read the served version and store `v1`
//! ([`from_served`]), the writes and prunes ([`crate::pipeline::children`]) send the served
//! version ([`to_served`]), and the GPUCluster teardown lists ResourceClaims with [`list_all`].

use std::fmt::Debug;

use k8s_openapi::api::resource::{v1, v1beta2};
use kube::{Api, Client, Resource, api::ListParams};
use serde::{Serialize, de::DeserializeOwned};

use crate::Error;

/// The version of `resource.k8s.io` the DRA kinds are read and written at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DraApi {
    /// `resource.k8s.io/v1`, the GA version (Kubernetes 1.34 and newer, on by default).
    #[default]
    V1,
    /// `resource.k8s.io/v1beta2`, where the server serves it but not `v1`.
    V1beta2,
}

impl DraApi {
    /// The version, such as `v1beta2`.
    #[must_use]
    pub fn version(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V1beta2 => "v1beta2",
        }
    }

    /// The version usable among `served` (the versions of `resource.k8s.io` the server serves):
    /// `v1`, else `v1beta2`; `None` when neither is served.
    #[must_use]
    pub fn among(served: &[String]) -> Option<Self> {
        [Self::V1, Self::V1beta2]
            .into_iter()
            .find(|api| served.iter().any(|v| v == api.version()))
    }
}

/// A `v1` DRA kind and its type at `v1beta2`, which has the same fields.
pub trait DraKind:
    Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug + Send + Sync + 'static
{
    /// The kind's type at `resource.k8s.io/v1beta2`.
    type V1beta2: Resource<DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static;
}

impl DraKind for v1::DeviceClass {
    type V1beta2 = v1beta2::DeviceClass;
}
impl DraKind for v1::ResourceClaimTemplate {
    type V1beta2 = v1beta2::ResourceClaimTemplate;
}
impl DraKind for v1::ResourceClaim {
    type V1beta2 = v1beta2::ResourceClaim;
}
impl DraKind for v1::ResourceSlice {
    type V1beta2 = v1beta2::ResourceSlice;
}

/// `object` (a `v1` DRA object) as the served `v1beta2` type: the same JSON, `apiVersion`
/// rewritten.
pub fn to_served<K: DraKind>(object: &K) -> Result<K::V1beta2, Error> {
    convert(object)
}

/// `object`, read at a served version, as `K`: a `v1` type, or a projection of one (such as
/// [`crate::cache::resource_slice::SliceSummary`]) that reads the same fields.
pub fn from_served<K, S>(object: &S) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    S: Serialize,
{
    convert(object)
}

/// [`from_served`] with the serde error, for the watches.
pub(crate) fn read_served<K, S>(object: &S) -> Result<K, serde_json::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    S: Serialize,
{
    let mut json = serde_json::to_value(object)?;
    if let Some(fields) = json.as_object_mut() {
        fields.insert(
            "apiVersion".to_owned(),
            K::api_version(&()).into_owned().into(),
        );
    }
    serde_json::from_value(json)
}

/// Re-reads `object`'s JSON as `To`, with `To`'s `apiVersion`.
fn convert<To, From>(object: &From) -> Result<To, Error>
where
    To: Resource<DynamicType = ()> + DeserializeOwned,
    From: Serialize,
{
    read_served(object).map_err(|source| Error::Serialize {
        what: format!("a {} at {}", To::kind(&()), To::api_version(&())),
        source,
    })
}

/// Page size of [`list_all`]: bounds what one response holds.
const PAGE: u32 = 500;

/// Every object of DRA kind `K` in every namespace matching `params`, listed at version `api`
/// (in pages of [`PAGE`] unless `params` sets a limit) and read as `v1`.
pub async fn list_all<K: DraKind>(
    client: &Client,
    api: DraApi,
    params: &ListParams,
) -> Result<Vec<K>, Error> {
    let action = format!(
        "listing the {}s of every namespace (resource.k8s.io/{})",
        K::kind(&()),
        api.version()
    );
    match api {
        DraApi::V1 => pages(&Api::<K>::all(client.clone()), params, &action).await,
        DraApi::V1beta2 => pages(&Api::<K::V1beta2>::all(client.clone()), params, &action)
            .await?
            .iter()
            .map(from_served)
            .collect(),
    }
}

/// Every object `api` lists for `params`, page after page.
async fn pages<S>(api: &Api<S>, params: &ListParams, action: &str) -> Result<Vec<S>, Error>
where
    S: Clone + std::fmt::Debug + DeserializeOwned,
{
    let mut params = params.clone();
    if params.limit.is_none() {
        params = params.limit(PAGE);
    }
    let mut items = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(Error::kube(action.to_owned()))?;
        items.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(items),
        }
    }
}

#[cfg(test)]
mod tests;
