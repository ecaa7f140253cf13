//! DaemonSet `nvidia-dcgm`: the privileged host engine listening on 5555, started once the
//! container toolkit is validated on the node. The GPUCluster's, `nvidia-dcgm-dra`, starts at
//! once and reaches the GPUs through its admin-access claim instead of the NVIDIA runtime.

use gpu_operator_core::build::{
    admin_claim,
    daemonset::{self, Identity},
    pod::{self, Barrier, Finish, Gpus, Wrap},
};
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{Container, ContainerPort, PodSpec, Probe, TCPSocketAction},
    },
    apimachinery::pkg::util::intstr::IntOrString,
};

use crate::{ADMIN_CLAIM_TEMPLATE, Form, Input, PORT};

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
    let form = &input.form;
    let pod = PodSpec {
        service_account_name: Some(form.name().to_owned()),
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
    let (barrier, gpus) = match form {
        Form::ClusterPolicy {
            validator_image,
            gpu_access,
        } => (
            input.shared.after_toolkit(validator_image),
            Some(Gpus {
                access: gpu_access,
                container: CONTAINER,
            }),
        ),
        Form::GpuCluster => (Barrier::None, None),
    };
    let steps = Finish {
        component: &input.component,
        barrier,
        host_paths: input.shared.rewrite_host_paths(),
        args: Some(CONTAINER),
    };
    let mut finished = pod::finish(pod, steps);
    if *form == Form::GpuCluster {
        admin_claim::hold(finished.pod_mut(), CONTAINER, ADMIN_CLAIM_TEMPLATE);
    }
    finished.into_daemonset(Wrap {
        identity: Identity {
            name: form.name(),
            component: form.component(),
            deploy_label: form.deploy_label(),
            always_on_delete: false,
        },
        daemonsets: &input.shared.daemonsets,
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::{ClusterPolicySpec, spec::EnvVar};
    use gpu_operator_core::build::runtime_class::GpuAccess;

    use super::*;

    fn render_as(spec: &ClusterPolicySpec, form: Form) -> PodSpec {
        let input = Input::new(
            spec,
            "nvcr.io/nvidia/cloud-native/dcgm:4".into(),
            form,
            "gpu-operator",
        );
        build(&input).spec.unwrap().template.spec.unwrap()
    }

    fn render(spec: &ClusterPolicySpec) -> PodSpec {
        let form = Form::ClusterPolicy {
            validator_image: "v:1".into(),
            gpu_access: GpuAccess::RuntimeClass("nvidia".into()),
        };
        render_as(spec, form)
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

    #[test]
    fn the_gpu_clusters_engine_holds_the_admin_claim_and_waits_for_nothing() {
        let mut spec = ClusterPolicySpec::default();
        spec.dcgm.container.resources = Some(
            serde_json::from_value(serde_json::json!({
                "limits": {"memory": "1Gi"}
            }))
            .unwrap(),
        );
        let pod = render_as(&spec, Form::GpuCluster);
        assert_eq!(
            pod.node_selector.unwrap()["nvidia.com/gpu.deploy.dcgm-dra"],
            "true"
        );
        assert_eq!(pod.service_account_name.as_deref(), Some("nvidia-dcgm-dra"));
        assert_eq!((pod.init_containers, pod.runtime_class_name), (None, None));
        let claim = &pod.resource_claims.unwrap()[0];
        assert_eq!(
            claim.resource_claim_template_name.as_deref(),
            Some("nvidia-dcgm-admin")
        );
        let resources = pod.containers[0].resources.as_ref().unwrap();
        assert!(resources.limits.is_some(), "the user's resources stay");
        assert_eq!(resources.claims.as_ref().unwrap()[0].name, claim.name);
    }
}
