//! The resources of the driver-validation init container, as NVIDIA sizes it: for each resource,
//! the largest request and the largest limit among the kubelet plugin containers that set them
//! (init containers run alone, so this never raises what the pod is scheduled with); a request
//! above the merged limit raises the limit. `None` when no container sets any.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::ResourceRequirements, apimachinery::pkg::api::resource::Quantity,
};

/// The merged requirements of `containers`.
pub fn largest<'a>(
    containers: impl IntoIterator<Item = Option<&'a ResourceRequirements>>,
) -> Option<ResourceRequirements> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for requirements in containers.into_iter().flatten() {
        merge(&mut requests, requirements.requests.as_ref());
        merge(&mut limits, requirements.limits.as_ref());
    }
    for (name, request) in &requests {
        if let Some(limit) = limits.get_mut(name)
            && value(request) > value(limit)
        {
            limit.clone_from(request);
        }
    }
    (!requests.is_empty() || !limits.is_empty()).then(|| ResourceRequirements {
        requests: Some(requests).filter(|r| !r.is_empty()),
        limits: Some(limits).filter(|l| !l.is_empty()),
        ..ResourceRequirements::default()
    })
}

fn merge(into: &mut BTreeMap<String, Quantity>, from: Option<&BTreeMap<String, Quantity>>) {
    for (name, quantity) in from.into_iter().flatten() {
        match into.get(name) {
            Some(current) if value(quantity) <= value(current) => {}
            _ => {
                into.insert(name.clone(), quantity.clone());
            }
        }
    }
}

/// The magnitude of a quantity such as `500m`, `128Mi` or `1e3`; an unreadable one counts as 0.
fn value(quantity: &Quantity) -> f64 {
    let text = quantity.0.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0_f64.powi(2),
        "Gi" => 1024.0_f64.powi(3),
        "Ti" => 1024.0_f64.powi(4),
        "Pi" => 1024.0_f64.powi(5),
        "Ei" => 1024.0_f64.powi(6),
        _ => return 0.0,
    };
    number.parse::<f64>().map_or(0.0, |n| n * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirements(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> ResourceRequirements {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                    .collect(),
            )
            .filter(|m: &BTreeMap<String, Quantity>| !m.is_empty())
        };
        ResourceRequirements {
            requests: map(requests),
            limits: map(limits),
            ..ResourceRequirements::default()
        }
    }

    #[test]
    fn quantities_compare_by_magnitude() {
        let q = |s: &str| value(&Quantity(s.to_owned()));
        assert!(q("500m") < q("1"));
        assert!(q("128Mi") > q("100M"));
        assert!((q("1e3") - 1000.0).abs() < 1e-9);
        assert!(q("2Gi") > q("2000Mi"));
    }

    #[test]
    fn nvidias_full_spec_merges_to_the_largest_of_each() {
        // NVIDIA's golden: gpus 100m/128Mi requests, 500m/256Mi limits; compute-domains
        // 200m/64Mi requests, 300m/512Mi limits.
        let gpus = requirements(
            &[("cpu", "100m"), ("memory", "128Mi")],
            &[("cpu", "500m"), ("memory", "256Mi")],
        );
        let cds = requirements(
            &[("cpu", "200m"), ("memory", "64Mi")],
            &[("cpu", "300m"), ("memory", "512Mi")],
        );
        let merged = largest([Some(&gpus), Some(&cds)]).unwrap();
        assert_eq!(
            merged,
            requirements(
                &[("cpu", "200m"), ("memory", "128Mi")],
                &[("cpu", "500m"), ("memory", "512Mi")]
            )
        );
        assert_eq!(largest([None, None]), None);
    }

    #[test]
    fn a_request_above_the_merged_limit_raises_it() {
        let a = requirements(&[("cpu", "2")], &[]);
        let b = requirements(&[], &[("cpu", "1")]);
        let merged = largest([Some(&a), Some(&b)]).unwrap();
        assert_eq!(merged.limits.unwrap()["cpu"].0, "2");
    }
}
