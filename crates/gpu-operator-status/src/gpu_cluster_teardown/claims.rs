//! What the GPUCluster says while DRA ResourceClaims still hold devices of the NVIDIA DRA driver.
//! Which claims do is read by the API crate's [`gpu_operator_api::gpu_cluster::claims`] (the node
//! labeller's switch away from DRA reads them too), re-exported here; the claims come listed by
//! [`super::reconcile`].

pub use gpu_operator_api::gpu_cluster::claims::{
    CLAIMING_DAEMONSETS, HeldClaim, OUR_DRIVERS, held,
};

/// How many claims the message names; the rest are counted.
pub const NAMED_CLAIMS: usize = 5;

/// The message of the GPUCluster's `Ready` while `held` claims remain: up to [`NAMED_CLAIMS`]
/// of them as `namespace/name` with their pods, the count of the rest, and the fix.
pub fn waiting_message(held: &[HeldClaim]) -> String {
    let named: Vec<String> = held
        .iter()
        .take(NAMED_CLAIMS)
        .map(|claim| {
            let pods = if claim.pods.is_empty() {
                "reserved for no pod".to_owned()
            } else {
                format!("reserved for pod(s) {}", claim.pods.join(", "))
            };
            format!("{}/{} ({pods})", claim.namespace, claim.name)
        })
        .collect();
    let more = held.len().saturating_sub(NAMED_CLAIMS);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    format!(
        "GPUCluster is being deleted: waiting for {} ResourceClaim(s) holding NVIDIA DRA devices \
         to be released before removing the DRA kubelet plugin: {}{more}; delete the workloads \
         (pods, Jobs, Deployments) that use them, or their ResourceClaims",
        held.len(),
        named.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(namespace: &str, name: &str, pods: &[&str]) -> HeldClaim {
        HeldClaim {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            pods: pods.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    #[test]
    fn the_message_names_the_claims_their_pods_and_the_fix_and_counts_the_rest() {
        let claims: Vec<_> = (0..7)
            .map(|i| claim("ml", &format!("c{i}"), &["p"]))
            .collect();
        let message = waiting_message(&claims);
        assert!(
            message.contains("waiting for 7 ResourceClaim(s)"),
            "{message}"
        );
        assert!(
            message.contains("ml/c0 (reserved for pod(s) p)"),
            "{message}"
        );
        assert!(
            message.contains("ml/c4") && !message.contains("ml/c5"),
            "{message}"
        );
        assert!(message.contains("and 2 more"), "{message}");
        assert!(message.contains("delete the workloads"), "{message}");
        let one = waiting_message(&claims[..1]);
        assert!(!one.contains("more"), "{one}");
        let unreserved = waiting_message(&[claim("a", "b", &[])]);
        assert!(
            unreserved.contains("a/b (reserved for no pod)"),
            "{unreserved}"
        );
    }
}
