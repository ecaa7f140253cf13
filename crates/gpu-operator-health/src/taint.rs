//! The optional taint `nvidia.com/gpu.unhealthy:NoSchedule` (off by default): present while
//! `GPUHealthy` is False, gone when it is True or Unknown (not knowing is no reason to keep work
//! off a node). Pure: the node's taints in, the new list out when it must change.

use k8s_openapi::api::core::v1::Taint;

/// The taint's key.
pub const UNHEALTHY_TAINT_KEY: &str = "nvidia.com/gpu.unhealthy";
/// Its effect.
pub const UNHEALTHY_TAINT_EFFECT: &str = "NoSchedule";

/// The node's taints with the unhealthy taint added (`unhealthy`) or removed; `None` when they
/// already are so.
pub fn desired_taints(taints: &[Taint], unhealthy: bool) -> Option<Vec<Taint>> {
    let ours = |t: &Taint| t.key == UNHEALTHY_TAINT_KEY && t.effect == UNHEALTHY_TAINT_EFFECT;
    let present = taints.iter().any(ours);
    match (unhealthy, present) {
        (true, false) => {
            let mut out = taints.to_vec();
            out.push(Taint {
                key: UNHEALTHY_TAINT_KEY.to_owned(),
                effect: UNHEALTHY_TAINT_EFFECT.to_owned(),
                value: None,
                time_added: None,
            });
            Some(out)
        }
        (false, true) => Some(taints.iter().filter(|t| !ours(t)).cloned().collect()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            effect: effect.into(),
            ..Taint::default()
        }
    }

    #[test]
    fn added_once_removed_once_others_kept() {
        let other = taint("dedicated", "NoExecute");
        let added = desired_taints(std::slice::from_ref(&other), true).unwrap();
        assert_eq!(added.len(), 2);
        assert_eq!(added[0], other);
        assert_eq!(desired_taints(&added, true), None, "already there");
        assert_eq!(desired_taints(&added, false).unwrap(), vec![other.clone()]);
        assert_eq!(desired_taints(&[other], false), None, "nothing to remove");
    }
}
