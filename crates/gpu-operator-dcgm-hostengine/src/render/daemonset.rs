//! DaemonSet `nvidia-dcgm`: the privileged host engine listening on 5555, started once the
//! container toolkit is validated on the node.

use gpu_operator_api::labels::operand;
use gpu_operator_core::{
    build::{
        daemonset::{self, Identity},
        pod::{self, Finish, Gpus, Wrap},
    },
    contract::Operand as _,
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{Container, ContainerPort, PodSpec, Probe, TCPSocketAction},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};

use crate::{Dcgm, Input, NAME, PORT};

/// The host engine container.
const CONTAINER: &str = "nvidia-dcgm-ctr";

/// The DaemonSet.
pub fn build(input: &Input) -> DaemonSet {
    let probe = || Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(PORT),
            ..TCPSocketAction::default()
        }),
        initial_delay_seconds: Some(15),
        ..Probe::default()
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.to_owned()),
        containers: vec![Container {
            name: CONTAINER.to_owned(),
            image: Some(input.image.clone()),
            env: Some(daemonset::merge_env(&[], &input.component.env)).filter(|e| !e.is_empty()),
            security_context: Some(pod::privileged()),
            ports: Some(vec![ContainerPort {
                name: Some("dcgm".to_owned()),
                container_port: PORT,
                ..ContainerPort::default()
            }]),
            liveness_probe: Some(probe()),
            readiness_probe: Some(probe()),
            ..Container::default()
        }],
        ..PodSpec::default()
    };
    let steps = Finish {
        component: &input.component,
        barrier: input.shared.after_toolkit(&input.validator_image),
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(CONTAINER),
    };
    pod::finish(pod, steps).into_daemonset(Wrap {
        identity: Identity {
            name: NAME,
            component: Dcgm::NAME,
            deploy_label: operand::DCGM,
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus: Some(Gpus {
            access: &input.gpu_access,
            container: CONTAINER,
        }),
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicySpec, spec::EnvVar};
    use gpu_operator_core::build::{
        component::Component, runtime_class::GpuAccess, shared::Shared,
    };

    use super::*;

    fn render(spec: &ClusterPolicySpec) -> PodSpec {
        let ds = build(&Input {
            image: "nvcr.io/nvidia/cloud-native/dcgm:4".into(),
            validator_image: "v:1".into(),
            gpu_access: GpuAccess::RuntimeClass("nvidia".into()),
            shared: Shared::of(spec),
            component: Component::of(
                &spec.dcgm.image,
                &spec.dcgm.container,
                spec.dcgm.host_network,
            ),
        });
        ds.spec.unwrap().template.spec.unwrap()
    }

    #[test]
    fn the_host_engine_listens_on_5555_behind_the_toolkit_barrier() {
        let pod = render(&ClusterPolicySpec::default());
        assert_eq!(
            pod.node_selector.unwrap()["nvidia.com/gpu.deploy.dcgm"],
            "true"
        );
        assert_eq!(pod.runtime_class_name.as_deref(), Some("nvidia"));
        assert_eq!(pod.service_account_name.as_deref(), Some("nvidia-dcgm"));
        let main = &pod.containers[0];
        assert_eq!(main.name, "nvidia-dcgm-ctr");
        assert_eq!(main.ports.as_ref().unwrap()[0].container_port, 5555);
        assert_eq!(
            main.security_context.as_ref().unwrap().privileged,
            Some(true)
        );
        let init = pod.init_containers.unwrap();
        assert_eq!(init[0].name, "toolkit-validation");
        assert_eq!(init[0].image.as_deref(), Some("v:1"));
    }

    #[test]
    fn host_network_and_user_env_follow_the_spec() {
        let mut spec = ClusterPolicySpec::default();
        spec.dcgm.host_network = Some(true);
        spec.dcgm.container.env = Some(vec![EnvVar::new("DCGM_X", "1")]);
        let pod = render(&spec);
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
        assert_eq!(pod.containers[0].env.as_ref().unwrap()[0].name, "DCGM_X");
    }
}
