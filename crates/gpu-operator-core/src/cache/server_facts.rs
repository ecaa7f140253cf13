//! What the operator knows about the API server itself, discovered once at start-up (the binary
//! asks `/version` and the API group list): its Kubernetes version and the versions of
//! `resource.k8s.io` (Dynamic Resource Allocation) it serves. Operands whose prerequisites are
//! the server's (the DRA driver needs Kubernetes 1.34 and `resource.k8s.io/v1` or `v1beta2`) read
//! them through [`crate::contract::Cluster::server`]; unknown facts ([`ServerFacts::default`])
//! refuse nothing. [`ServerFacts::dra_api`] picks the version the DRA kinds are read and written
//! at ([`crate::dra_api`]).

use crate::dra_api::DraApi;

/// The API server's version and the `resource.k8s.io` versions it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// `(major, minor)` of the API server, such as `(1, 34)`; `None` when not known.
    pub version: Option<(u32, u32)>,
    /// The versions of API group `resource.k8s.io` the server serves (`v1`, `v1beta2`, …), empty
    /// when none is served or discovery failed.
    pub resource_api_versions: Vec<String>,
}

/// The facts of a server nobody asked: nothing known.
static UNKNOWN: ServerFacts = ServerFacts {
    version: None,
    resource_api_versions: Vec::new(),
};

impl ServerFacts {
    /// The facts of a server nobody asked, for tests and tools without a server.
    #[must_use]
    pub fn unknown() -> &'static Self {
        &UNKNOWN
    }

    /// Whether anything is known: discovery answered.
    #[must_use]
    pub fn is_known(&self) -> bool {
        self.version.is_some() || !self.resource_api_versions.is_empty()
    }

    /// The `(major, minor)` of `/version`'s `major` and `minor` fields, which some distributions
    /// suffix (`"34+"`).
    #[must_use]
    pub fn parse_version(major: &str, minor: &str) -> Option<(u32, u32)> {
        let number = |text: &str| {
            let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        };
        Some((number(major)?, number(minor)?))
    }

    /// The version of `resource.k8s.io` the DRA kinds are read and written at: `v1`, else
    /// `v1beta2`; `v1` where nothing is known (no discovery); `None` when the server serves
    /// neither (the DRA operands refuse then).
    #[must_use]
    pub fn dra_api(&self) -> Option<DraApi> {
        if self.version.is_none() {
            return Some(DraApi::V1);
        }
        DraApi::among(&self.resource_api_versions)
    }

    /// [`Self::dra_api`], or `v1` where no version is usable (its watches then find nothing,
    /// and nothing is written).
    #[must_use]
    pub fn dra_api_in_use(&self) -> DraApi {
        self.dra_api().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_with_the_suffixes_distributions_add() {
        assert_eq!(ServerFacts::parse_version("1", "34"), Some((1, 34)));
        assert_eq!(ServerFacts::parse_version("1", "33+"), Some((1, 33)));
        assert_eq!(ServerFacts::parse_version("", "33"), None);
    }

    #[test]
    fn the_unknown_server_knows_nothing() {
        let unknown = ServerFacts::unknown();
        assert!(!unknown.is_known());
        assert_eq!(unknown, &ServerFacts::default());
        assert_eq!(unknown.dra_api(), Some(DraApi::V1));
    }

    #[test]
    fn the_dra_api_is_v1_else_v1beta2() {
        let server = |versions: &[&str]| ServerFacts {
            version: Some((1, 34)),
            resource_api_versions: versions.iter().map(|v| (*v).to_owned()).collect(),
        };
        assert_eq!(server(&["v1", "v1beta2"]).dra_api(), Some(DraApi::V1));
        assert_eq!(
            server(&["v1beta2", "v1beta1"]).dra_api(),
            Some(DraApi::V1beta2)
        );
        assert_eq!(server(&["v1beta1"]).dra_api(), None);
        assert_eq!(server(&["v1beta1"]).dra_api_in_use(), DraApi::V1);
        assert_eq!(server(&[]).dra_api(), None);
    }
}
