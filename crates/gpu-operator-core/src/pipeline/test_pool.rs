//! A second owner kind for the pipeline's unit tests: `Pool` (`example.com/v1`), one per node
//! pool and not a singleton, as NVIDIADriver is, with an operand of its own. It shows that what
//! the pipeline does for the ClusterPolicy it does for any [`Owner`], without a copy.

use std::{borrow::Cow, sync::Arc};

use k8s_openapi::{
    ClusterResourceScope,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta},
};
use kube::runtime::reflector::Store;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::{
    Error,
    cache::{
        change_stream::Changes,
        stores::{Stores, Subscriptions},
    },
    contract::{Children, Cluster, Operand, Owner},
};

/// A pool of nodes and the driver version it runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Pool {
    pub metadata: ObjectMeta,
    pub spec: PoolSpec,
    pub conditions: Option<Vec<Condition>>,
}

/// What a pool asks for.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PoolSpec {
    pub version: Option<String>,
}

impl Pool {
    /// A pool named `name` with uid `uid` asking for `version`, with a status (no conditions).
    pub fn new(name: &str, uid: &str, version: Option<&str>) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                uid: Some(uid.to_owned()),
                generation: Some(1),
                ..ObjectMeta::default()
            },
            spec: PoolSpec {
                version: version.map(str::to_owned),
            },
            conditions: Some(Vec::new()),
        }
    }
}

impl kube::Resource for Pool {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        "Pool".into()
    }
    fn group((): &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version((): &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural((): &()) -> Cow<'_, str> {
        "pools".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Owner for Pool {
    type Spec = PoolSpec;
    const SINGLETON: bool = false;
    const STATUS_FIELDS: &'static [&'static str] = &[];

    fn spec(&self) -> &PoolSpec {
        &self.spec
    }
    fn conditions(&self) -> Option<&[Condition]> {
        self.conditions.as_deref()
    }
    fn state(&self) -> Option<&str> {
        None
    }
    fn cache(_: &Stores) -> &Store<Self> {
        unreachable!("the unit tests run no caches")
    }
    fn events(_: &Stores) -> &Arc<Notify> {
        unreachable!("the unit tests run no caches")
    }
    fn changes(_: &Subscriptions) -> Changes<Self> {
        unreachable!("the unit tests run no caches")
    }
}

/// The pool's driver: disabled without a version, a ConfigMap naming it otherwise.
pub struct PoolDriver;

impl Operand for PoolDriver {
    type Owner = Pool;
    type Input = String;
    const NAME: &'static str = "pool-driver";
    const CONDITION: &'static str = "DriverReady";
    const SECTION: &'static str = "version";

    fn validate(spec: &PoolSpec, _cluster: &Cluster<'_>) -> Result<Option<String>, Error> {
        Ok(spec.version.clone())
    }

    fn render(version: &String) -> Children {
        let mut map = k8s_openapi::api::core::v1::ConfigMap::default();
        map.metadata.name = Some(format!("driver-{version}"));
        Children {
            config_maps: vec![map],
            ..Children::default()
        }
    }
}
