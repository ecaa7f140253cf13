//! Names in a device plugin configuration: resource names (`gpu` is short for `nvidia.com/gpu`;
//! at most 63 characters; the part after the `/` a DNS-1123 subdomain), which of them the plugin
//! can share, and the device references a `devices` list may hold (GPU and MIG indexes and
//! UUIDs).

/// The domain every resource name is in.
const PREFIX: &str = "nvidia.com/";
/// The longest fully-qualified resource name.
const MAX_NAME_LEN: usize = 63;
/// The longest DNS-1123 subdomain.
const MAX_SUBDOMAIN_LEN: usize = 253;
/// The full-GPU resource.
pub(super) const GPU: &str = "nvidia.com/gpu";

/// The fully-qualified form of resource name `raw`, or why the plugin refuses it.
pub(super) fn normalise(raw: &str) -> Result<String, String> {
    let full = if raw.starts_with(PREFIX) {
        raw.to_owned()
    } else {
        format!("{PREFIX}{raw}")
    };
    if full.len() > MAX_NAME_LEN {
        return Err(format!(
            "resource name `{full}` is too long: {} characters, with the nvidia.com/ prefix, \
             where at most {MAX_NAME_LEN} are allowed",
            full.len()
        ));
    }
    let name = &full[PREFIX.len()..];
    if name.is_empty() {
        return Err("a resource name must not be empty: use e.g. nvidia.com/gpu".to_owned());
    }
    if !is_dns_subdomain(name) {
        let domain = if name.contains('/') {
            "; resource names are always in the nvidia.com/ domain"
        } else {
            ""
        };
        return Err(format!(
            "resource name `{full}`: `{name}` is not a valid DNS-1123 subdomain (use lower-case \
             letters, digits, '-' and '.', starting and ending with a letter or digit){domain}"
        ));
    }
    Ok(full)
}

/// Whether `name` is a DNS-1123 subdomain: dot-separated labels of lower-case letters, digits
/// and `-`, each starting and ending with a letter or digit.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= MAX_SUBDOMAIN_LEN
        && name.split('.').all(|label| {
            let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            label.starts_with(alphanumeric)
                && label.ends_with(alphanumeric)
                && label.chars().all(|c| alphanumeric(c) || c == '-')
        })
}

/// Whether the plugin advertises a resource of (fully-qualified) `name` that it could share:
/// `nvidia.com/gpu`, or a MIG profile such as `nvidia.com/mig-1g.10gb` or
/// `nvidia.com/mig-1g.10gb.me` (mixed MIG strategy).
pub(super) fn is_sharable(name: &str) -> bool {
    name == GPU || is_mig_resource(name)
}

/// Whether `name` is a MIG resource: `nvidia.com/mig-<G>g.<M>gb`, maybe with attributes.
pub(super) fn is_mig_resource(name: &str) -> bool {
    let Some(profile) = name.strip_prefix("nvidia.com/mig-") else {
        return false;
    };
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let slices = digits(profile);
    let Some(rest) = profile[slices..].strip_prefix("g.") else {
        return false;
    };
    let memory = digits(rest);
    let Some(attributes) = rest[memory..].strip_prefix("gb") else {
        return false;
    };
    slices > 0
        && memory > 0
        && (attributes.is_empty() || attributes.starts_with('.') || attributes.starts_with('-'))
}

/// Whether `text` names a device: a GPU index `0`, a MIG index `0:1`, `GPU-<uuid>`,
/// `MIG-<uuid>` or `MIG-GPU-<uuid>/<gi>/<ci>`.
pub(super) fn is_device_ref(text: &str) -> bool {
    is_index(text) || is_mig_index(text) || is_gpu_uuid(text) || is_mig_uuid(text)
}

fn is_index(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && text.parse::<u64>().is_ok()
}

fn is_mig_index(text: &str) -> bool {
    text.split_once(':')
        .is_some_and(|(gpu, mig)| is_index(gpu) && is_index(mig))
}

fn is_gpu_uuid(text: &str) -> bool {
    text.strip_prefix("GPU-").is_some_and(is_uuid)
}

fn is_mig_uuid(text: &str) -> bool {
    let Some(suffix) = text.strip_prefix("MIG-") else {
        return false;
    };
    if is_uuid(suffix) {
        return true;
    }
    let mut parts = suffix.splitn(3, '/');
    let (Some(gpu), Some(gi), Some(ci)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    is_gpu_uuid(gpu) && is_index(gi) && is_index(ci)
}

/// Whether `text` is a UUID in one of the forms NVIDIA's parser takes: hyphenated
/// (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`), in braces, with a `urn:uuid:` prefix, or 32 bare
/// hex digits.
fn is_uuid(text: &str) -> bool {
    let hyphenated = |s: &str| {
        s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            })
    };
    match text.len() {
        32 => text.bytes().all(|b| b.is_ascii_hexdigit()),
        36 => hyphenated(text),
        38 => text
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .is_some_and(hyphenated),
        45 => {
            text.get(..9)
                .is_some_and(|prefix| prefix.eq_ignore_ascii_case("urn:uuid:"))
                && text.get(9..).is_some_and(hyphenated)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "b1028956-cfa2-0990-bf4a-5da9abb51763";

    #[test]
    fn short_names_get_the_nvidia_prefix() {
        assert_eq!(normalise("gpu").as_deref(), Ok(GPU));
        assert_eq!(
            normalise("nvidia.com/gpu.shared").as_deref(),
            Ok("nvidia.com/gpu.shared")
        );
        assert_eq!(
            normalise("mig-1g.10gb").as_deref(),
            Ok("nvidia.com/mig-1g.10gb")
        );
    }

    #[test]
    fn bad_names_are_refused() {
        let long = format!("nvidia.com/{}", "a".repeat(53));
        assert!(normalise(&long).unwrap_err().contains("too long"));
        assert!(normalise(&long[..62]).is_ok());
        for bad in [
            "GPU",
            "gpu_shared",
            "-gpu",
            "gpu.",
            "a..b",
            "",
            "example.com/gpu",
        ] {
            assert!(normalise(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            normalise("example.com/gpu")
                .unwrap_err()
                .contains("nvidia.com/ domain")
        );
    }

    #[test]
    fn sharable_names_are_the_gpu_and_mig_profiles() {
        for name in [
            GPU,
            "nvidia.com/mig-1g.10gb",
            "nvidia.com/mig-1g.10gb.me",
            "nvidia.com/mig-7g.80gb",
        ] {
            assert!(is_sharable(name), "{name}");
        }
        for name in [
            "nvidia.com/gpus",
            "nvidia.com/gpu.shared",
            "nvidia.com/mig-1g",
            "nvidia.com/mig-g.5gb",
        ] {
            assert!(!is_sharable(name), "{name}");
        }
    }

    #[test]
    fn device_references() {
        let good = [
            "0".to_owned(),
            "12".to_owned(),
            "0:1".to_owned(),
            format!("GPU-{UUID}"),
            format!("GPU-{}", UUID.replace('-', "")),
            format!("GPU-{{{UUID}}}"),
            format!("GPU-urn:uuid:{UUID}"),
            format!("MIG-{UUID}"),
            format!("MIG-GPU-{UUID}/1/0"),
        ];
        for text in &good {
            assert!(is_device_ref(text), "{text}");
        }
        let bad = [
            String::new(),
            "gpu0".to_owned(),
            "-1".to_owned(),
            "+1".to_owned(),
            "0:1:2".to_owned(),
            "0:".to_owned(),
            format!("GPU-{}", &UUID[1..]),
            format!("MIG-GPU-{UUID}/1"),
            format!("MIG-GPU-{UUID}/1/x"),
            format!("gpu-{UUID}"),
        ];
        for text in &bad {
            assert!(!is_device_ref(text), "{text}");
        }
    }
}
