//! Image references by NVIDIA's rules: `repository/image:version`, `repository/image@sha256:…`,
//! `image` alone used verbatim, else the component's environment fallback (`DEVICE_PLUGIN_IMAGE`,
//! …), else an error naming the component; and the OS tag NVIDIA appends to the images of the
//! driver and the vGPU manager, which are built for one OS (`<version>-ubuntu22.04`).

use gpu_operator_api::spec::ImageSpec;

use crate::cache::facts::OsRelease;

/// Why no image could be resolved for a component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Some but not all of repository, image and version are set (the CRD rejects this; kept for
    /// objects stored before the rule existed).
    #[error(
        "{component}: incomplete image: set `image` alone, or all of `repository`, `image` and `version`"
    )]
    Partial {
        /// The ClusterPolicy section, such as `devicePlugin`.
        component: String,
    },
    /// Neither the ClusterPolicy nor the operator's environment names an image.
    #[error(
        "{component}: no image: set spec.{component}.repository, image and version, or the operator's {env} environment variable"
    )]
    Missing {
        /// The ClusterPolicy section.
        component: String,
        /// The environment variable that would provide a default.
        env: String,
    },
}

/// Resolves the image of `component` (the ClusterPolicy section name) from `spec`, falling back to
/// `fallback`, the value of the environment variable `env` if it is set.
pub fn resolve(
    component: &str,
    spec: &ImageSpec,
    env: &str,
    fallback: Option<&str>,
) -> Result<String, ImageError> {
    match (spec.repository(), spec.name(), spec.version()) {
        (None, Some(image), None) => Ok(image.to_owned()),
        (Some(repository), Some(image), Some(version)) => {
            let separator = if version.starts_with("sha256:") {
                '@'
            } else {
                ':'
            };
            Ok(format!(
                "{}/{image}{separator}{version}",
                repository.trim_end_matches('/')
            ))
        }
        (None, None, None) => match fallback.filter(|f| !f.is_empty()) {
            Some(image) => Ok(image.to_owned()),
            None => Err(ImageError::Missing {
                component: component.to_owned(),
                env: env.to_owned(),
            }),
        },
        _ => Err(ImageError::Partial {
            component: component.to_owned(),
        }),
    }
}

/// The Kubernetes `imagePullPolicy` for the spec's string: `Always`, `Never`, else `IfNotPresent`.
pub fn pull_policy(spec: &ImageSpec) -> &'static str {
    match spec.pull_policy() {
        Some("Always") => "Always",
        Some("Never") => "Never",
        _ => "IfNotPresent",
    }
}

/// The image tag suffix of an OS: `<id><VERSION_ID>`, with only the major version for RHEL,
/// Rocky Linux and Oracle Linux (`ubuntu22.04`, `rhel9`), as NVIDIA builds its driver images.
pub fn os_tag(os: &OsRelease) -> String {
    let version = match os.id.as_str() {
        "rhel" | "rocky" | "ol" => os.version_id.split('.').next().unwrap_or_default(),
        _ => os.version_id.as_str(),
    };
    format!("{}{version}", os.id)
}

/// `<image>-<tag>` (an OS tag of [`os_tag`]), unless the image is pinned by digest (NVIDIA's
/// rule: a digest names the image exactly).
pub fn with_os_tag(image: &str, tag: &str) -> String {
    if image.contains("sha256:") {
        image.to_owned()
    } else {
        format!("{image}-{tag}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(repository: Option<&str>, image: Option<&str>, version: Option<&str>) -> ImageSpec {
        ImageSpec {
            repository: repository.map(Into::into),
            name: image.map(Into::into),
            version: version.map(Into::into),
            ..ImageSpec::default()
        }
    }

    #[test]
    fn repository_image_and_tag() {
        let s = spec(
            Some("nvcr.io/nvidia"),
            Some("k8s-device-plugin"),
            Some("v0.17.0"),
        );
        assert_eq!(
            resolve("devicePlugin", &s, "DEVICE_PLUGIN_IMAGE", None).unwrap(),
            "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"
        );
    }

    #[test]
    fn digest_versions_use_an_at_sign() {
        let s = spec(
            Some("nvcr.io/nvidia/"),
            Some("k8s-device-plugin"),
            Some("sha256:abc"),
        );
        assert_eq!(
            resolve("devicePlugin", &s, "E", None).unwrap(),
            "nvcr.io/nvidia/k8s-device-plugin@sha256:abc"
        );
    }

    #[test]
    fn image_alone_is_used_verbatim() {
        let s = spec(None, Some("registry.local/plugin@sha256:def"), None);
        assert_eq!(
            resolve("devicePlugin", &s, "E", Some("ignored")).unwrap(),
            "registry.local/plugin@sha256:def"
        );
    }

    #[test]
    fn the_environment_is_the_fallback_and_its_absence_names_the_component() {
        let empty = ImageSpec::default();
        assert_eq!(
            resolve("validator", &empty, "VALIDATOR_IMAGE", Some("x/y:1")).unwrap(),
            "x/y:1"
        );
        let error = resolve("validator", &empty, "VALIDATOR_IMAGE", Some(""))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("validator") && error.contains("VALIDATOR_IMAGE"),
            "{error}"
        );
    }

    #[test]
    fn partial_specs_are_errors() {
        let s = spec(Some("nvcr.io/nvidia"), Some("plugin"), None);
        assert!(matches!(
            resolve("devicePlugin", &s, "E", Some("x")),
            Err(ImageError::Partial { .. })
        ));
    }

    #[test]
    fn pull_policy_defaults_to_if_not_present() {
        let mut s = ImageSpec::default();
        assert_eq!(pull_policy(&s), "IfNotPresent");
        s.pull_policy = Some("Always".into());
        assert_eq!(pull_policy(&s), "Always");
    }

    fn os(id: &str, version: &str) -> OsRelease {
        OsRelease {
            id: id.into(),
            version_id: version.into(),
        }
    }

    #[test]
    fn os_tag_keeps_the_full_version_except_major_only_for_rhel_rocky_and_oracle() {
        assert_eq!(os_tag(&os("ubuntu", "22.04")), "ubuntu22.04");
        assert_eq!(os_tag(&os("rhel", "9.4")), "rhel9");
        assert_eq!(os_tag(&os("rocky", "8.10")), "rocky8");
        assert_eq!(os_tag(&os("ol", "9.3")), "ol9");
        assert_eq!(os_tag(&os("sles", "15.5")), "sles15.5");
    }

    #[test]
    fn the_os_tag_is_appended_unless_a_digest_pins_the_image() {
        assert_eq!(
            with_os_tag("r/driver:570.1", "rhel9"),
            "r/driver:570.1-rhel9"
        );
        assert_eq!(
            with_os_tag("r/driver@sha256:abc", "rhel9"),
            "r/driver@sha256:abc"
        );
    }
}
