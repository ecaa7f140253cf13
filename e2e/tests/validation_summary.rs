//! The operator sums up what the validators report: the validator binary runs for a simulated node
//! of its own, and the ClusterPolicy's `NodesValidated` condition shows the per-component counts
//! and names that node with the reason it fails — then stops naming it for the fixed component.
//! The validator runs with a token of the ServiceAccount the operator created for it, so its
//! rendered RBAC is proven to be enough. The GPU health agent, run the same way, reports the
//! node's health unknown (no NVML), and `NodesHealthy` counts it apart; a fault in the node's
//! report makes `NodesHealthy` name the node with its class.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_e2e::validator_host as support;

use std::time::Duration;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec,
    conditions::{NODES_HEALTHY, NODES_VALIDATED},
    node_validation::ANNOTATION,
    validator::reason,
};
use gpu_operator_harness::{
    access::kubectl_ok,
    chart::{operator_kubeconfig, remove_operator_rbac, token_kubeconfig},
    client,
    crd::ensure_crd,
    operator::Operator,
    unique_name, wait_until,
};
use k8s_openapi::api::{
    core::v1::{Namespace, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::SimulatedNode;

const IMAGES: [(&str, &str); 2] = [
    (
        "DEVICE_PLUGIN_IMAGE",
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
    ),
    ("VALIDATOR_IMAGE", "ghcr.io/example/gpu-operator:e2e"),
];

/// Waits until the `NodesValidated` message satisfies `check`; returns it.
async fn wait_summary(
    policies: &Api<ClusterPolicy>,
    name: &str,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> String {
    let result = wait_until(what, Duration::from_secs(90), || async {
        let policy = policies.get(name).await?;
        let message = gpu_operator_e2e::scenario::condition(&policy, NODES_VALIDATED)
            .map(|c| c.message.clone())
            .unwrap_or_default();
        Ok(check(&message).then_some(message))
    })
    .await;
    result.unwrap_or_else(|error| {
        let policy = kubectl_ok(&[
            "get",
            "clusterpolicy",
            name,
            "-o",
            "jsonpath={.status.conditions}",
        ])
        .unwrap_or_default();
        panic!("{error}; conditions: {policy}")
    })
}

#[tokio::test]
async fn the_cluster_policy_counts_validated_nodes_and_names_the_failing_one() {
    let client = client().await.unwrap();
    ensure_crd().await.unwrap();
    let namespace = unique_name("gpu-operator-summary");
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(&namespace);
    std::fs::create_dir_all(&dir).unwrap();
    let (kubeconfig, _) = operator_kubeconfig(&client, &namespace, &namespace, &dir)
        .await
        .unwrap();
    let operator =
        Operator::start(&kubeconfig, &namespace, &IMAGES, &dir.join("operator.log")).unwrap();
    let policies: Api<ClusterPolicy> = Api::all(client.clone());
    let name = unique_name("summary-policy");
    policies
        .create(
            &PostParams::default(),
            &ClusterPolicy::new(&name, ClusterPolicySpec::default()),
        )
        .await
        .unwrap();
    let node = SimulatedNode::new(&client).await;

    // The validator's identity and permissions, as the operator renders them.
    let validator_sa = "nvidia-operator-validator";
    wait_until("the validator's RBAC", Duration::from_secs(60), || async {
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), &namespace)
            .get_opt(validator_sa)
            .await?;
        let role = Api::<Role>::namespaced(client.clone(), &namespace)
            .get_opt(validator_sa)
            .await?;
        let cluster_role = Api::<ClusterRole>::all(client.clone())
            .get_opt(validator_sa)
            .await?;
        let role_binding = Api::<RoleBinding>::namespaced(client.clone(), &namespace)
            .get_opt(validator_sa)
            .await?;
        // Cluster-scoped and named alike for every install: it must bind this namespace's account.
        let cluster_binding = Api::<ClusterRoleBinding>::all(client.clone())
            .get_opt(validator_sa)
            .await?
            .and_then(|b| b.subjects)
            .is_some_and(|s| s.iter().any(|s| s.namespace.as_deref() == Some(&namespace)));
        Ok((sa.is_some()
            && role.is_some()
            && cluster_role.is_some()
            && role_binding.is_some()
            && cluster_binding)
            .then_some(()))
    })
    .await
    .unwrap();
    let (validator_config, _) = token_kubeconfig(&client, &namespace, validator_sa, &dir)
        .await
        .unwrap();
    let as_validator = [("KUBECONFIG", validator_config.to_str().unwrap())];

    // No driver on the node: the summary names it with the driver's reason.
    let (code, log) = node.validate("driver", &as_validator).await;
    assert_eq!(code, 1, "{log}");
    let expected = format!("{} (driver: {})", node.name, reason::DRIVER_NOT_FOUND);
    let message = wait_summary(
        &policies,
        &name,
        "the summary to name the driverless node",
        |m| m.contains(&expected),
    )
    .await;
    assert!(
        message.starts_with("GPU nodes validated: driver "),
        "{message}"
    );

    // The driver fixed: the node is validated for the driver and named for what is still missing.
    node.install_driver();
    let (code, log) = node.validate("driver", &as_validator).await;
    assert_eq!(code, 0, "{log}");
    // The toolkit has not been checked yet, so the stack is still pending on this node.
    let fixed = format!("{} (stack: {})", node.name, reason::VALIDATION_PENDING);
    let message = wait_summary(
        &policies,
        &name,
        "the summary to move past the driver",
        |m| m.contains(&fixed),
    )
    .await;
    assert!(!message.contains(&expected), "{message}");

    health_is_summed_up(&node, &as_validator, &policies, &name).await;
    sandbox_is_summed_up(&client, &namespace, &dir, &node, &policies, &name).await;

    operator.stop().unwrap();
    node.delete().await;
    policies
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    remove_operator_rbac(&namespace);
    Api::<Namespace>::all(client.clone())
        .delete(&namespace, &DeleteParams::default())
        .await
        .unwrap();
}

/// The node given to VMs (`vm-passthrough`, sandbox workloads on): the sandbox validator's
/// components, the real binary with the token of the ServiceAccount the operator renders for
/// `nvidia-sandbox-validator`, check a fake sysfs with the node's GPU bound to `vfio-pci`, and
/// `NodesValidated` counts the node for the sandbox stack, no longer for the container stack.
async fn sandbox_is_summed_up(
    client: &kube::Client,
    namespace: &str,
    dir: &std::path::Path,
    node: &SimulatedNode,
    policies: &Api<ClusterPolicy>,
    name: &str,
) {
    policies
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"sandboxWorkloads": {"enabled": true}}})),
        )
        .await
        .unwrap();
    kubectl_ok(&[
        "label",
        "node",
        &node.name,
        "nvidia.com/gpu.workload.config=vm-passthrough",
    ])
    .unwrap();
    let sandbox_sa = "nvidia-sandbox-validator";
    wait_until(
        "the sandbox validator's RBAC",
        Duration::from_secs(60),
        || async {
            let bound = Api::<ClusterRoleBinding>::all(client.clone())
                .get_opt(sandbox_sa)
                .await?
                .and_then(|b| b.subjects)
                .is_some_and(|s| s.iter().any(|s| s.namespace.as_deref() == Some(namespace)));
            Ok(bound.then_some(()))
        },
    )
    .await
    .unwrap();
    let (config, _) = token_kubeconfig(client, namespace, sandbox_sa, dir)
        .await
        .unwrap();
    // One H100 at 0000:3b:00.0 bound to vfio-pci, laid out as the kernel's sysfs ABI has it.
    let sys = node.dir.join("host/sys");
    let device = sys.join("devices/pci0000:00/0000:3b:00.0");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::create_dir_all(sys.join("bus/pci/drivers/vfio-pci")).unwrap();
    std::fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    std::fs::write(device.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(device.join("class"), "0x030200\n").unwrap();
    std::os::unix::fs::symlink("../../../bus/pci/drivers/vfio-pci", device.join("driver")).unwrap();
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:3b:00.0",
        sys.join("bus/pci/devices/0000:3b:00.0"),
    )
    .unwrap();
    let as_sandbox_validator = [("KUBECONFIG", config.to_str().unwrap())];
    for component in ["vfio-pci", "vgpu-manager", "vgpu-devices"] {
        let (code, log) = node.validate(component, &as_sandbox_validator).await;
        assert_eq!(code, 0, "{component}: {log}");
    }
    let counted =
        "VM nodes validated: vfio-pci 1/1, vgpu-manager 1/1, vgpu-devices 1/1, sandbox 1/1";
    let message = wait_summary(policies, name, "the VM node counted for the sandbox", |m| {
        m.contains(counted)
    })
    .await;
    assert!(!message.contains(&node.name), "{message}");
}

/// The GPU health agent, the real binary with the validator's token: this node's fake driver has
/// no NVML, so its health is unknown, which `NodesHealthy` counts apart and does not call
/// unhealthy; a fault as the agent reports it (its summary annotation) names the node.
async fn health_is_summed_up(
    node: &SimulatedNode,
    as_validator: &[(&str, &str)],
    policies: &Api<ClusterPolicy>,
    name: &str,
) {
    let mut health = node.command("driver", as_validator);
    health.args(["health", "--once"]);
    let output = tokio::time::timeout(Duration::from_secs(60), health.output())
        .await
        .unwrap()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    let healthy = |policy: &ClusterPolicy| {
        gpu_operator_e2e::scenario::condition(policy, NODES_HEALTHY)
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
            .unwrap_or_default()
    };
    let wait_health = |what: &'static str, check: fn(&(String, String, String)) -> bool| async move {
        wait_until(what, Duration::from_secs(60), || async {
            let condition = healthy(&policies.get(name).await?);
            Ok(check(&condition).then_some(condition))
        })
        .await
        .unwrap()
    };
    let (_, reason, message) = wait_health("NodesHealthy to count the unknown node", |c| {
        c.0 == "True" && c.2.contains("1 cannot read their GPUs (HealthUnknown)")
    })
    .await;
    assert_eq!(reason, "NoUnhealthyNodes", "{message}");
    node.nodes()
        .patch(
            &node.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                ANNOTATION: "GPUHealthy=False/DoubleBitECC"
            }}})),
        )
        .await
        .unwrap();
    let (_, reason, message) = wait_health("NodesHealthy to name the unhealthy node", |c| {
        c.0 == "False"
    })
    .await;
    assert_eq!(reason, "UnhealthyNodes");
    assert!(
        message.contains(&format!("1 unhealthy: {} (DoubleBitECC)", node.name)),
        "{message}"
    );
}
