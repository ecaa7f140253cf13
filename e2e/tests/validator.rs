//! The node-side validator against the real API server: the `gpu-operator-validator` binary runs
//! as a process for a simulated node of its own, with a fake host root (a fake `nvidia-smi` and a
//! fake `/proc/driver/nvidia/version`), writes its Node conditions without touching kubelet's,
//! reports a broken driver with the exact reason and recovers when it is fixed, checks the MIG
//! strategy, runs the CUDA workload pod and replaces it on the next run (its real failure is
//! `real_node_cuda.rs`), and lifts the startup taint; and its `metrics`
//! component (the node status exporter), run under NVIDIA's command name, serves the node's
//! gauges from its status files, driver, Node capacity and PCI devices.
#![cfg(feature = "e2e")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_operator_e2e::validator_host as support;

use std::time::Duration;

use gpu_operator_api::{conditions::node as cond, validator};
use gpu_operator_harness::{client, unique_name, wait_until};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, ResourceExt as _,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use support::{
    DRIVER, SimulatedNode, TIMEOUT, condition, fake_smi, free_port, gauge, http_get, status_of,
    validator_binary, write_script,
};

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one scenario, step by step")]
async fn the_validator_reports_each_component_recovers_and_lifts_the_startup_taint() {
    let client = client().await.unwrap();
    let node = SimulatedNode::new(&client).await;

    // No driver at all.
    let (code, log) = node.validate("driver", &[]).await;
    assert_eq!(code, 1, "{log}");
    let conditions = node.conditions().await;
    let (status, reason, message) = status_of(&conditions, cond::GPU_DRIVER_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", validator::reason::DRIVER_NOT_FOUND),
        "{message}"
    );
    assert!(!node.validations().join("driver-ready").exists());
    let (_, reason, _) = status_of(&conditions, cond::GPU_STACK_READY);
    assert_eq!(reason, validator::reason::DRIVER_NOT_READY);

    // A working host driver.
    node.install_driver();
    let (code, log) = node.validate("driver", &[]).await;
    assert_eq!(code, 0, "{log}");
    let conditions = node.conditions().await;
    let (status, reason, message) = status_of(&conditions, cond::GPU_DRIVER_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", validator::reason::DRIVER_VALIDATED)
    );
    assert!(
        message.contains(DRIVER) && message.contains("8 GPUs"),
        "{message}"
    );
    let driver_ready = std::fs::read_to_string(node.validations().join("driver-ready")).unwrap();
    assert!(
        driver_ready.starts_with("IS_HOST_DRIVER=true\n"),
        "{driver_ready}"
    );
    assert_eq!(
        status_of(&conditions, "Ready").0,
        "True",
        "kubelet's Ready must survive"
    );
    let transition = condition(&conditions, cond::GPU_DRIVER_READY)
        .unwrap()
        .last_transition_time
        .clone();
    let heartbeat = condition(&conditions, cond::GPU_DRIVER_READY)
        .unwrap()
        .last_heartbeat_time
        .clone();

    // Nothing changed: no patch, so the heartbeat stays.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(node.validate("driver", &[]).await.0, 0);
    let conditions = node.conditions().await;
    assert_eq!(
        condition(&conditions, cond::GPU_DRIVER_READY)
            .unwrap()
            .last_heartbeat_time,
        heartbeat
    );

    // The kernel module goes away: False with the exact reason; with WITH_WAIT it retries until fixed.
    node.unload_module();
    let mut waiting = node
        .command("driver", &[("WITH_WAIT", "true")])
        .spawn()
        .unwrap();
    let conditions = node
        .wait_for("GPUDriverReady=False", |c| {
            condition(c, cond::GPU_DRIVER_READY).is_some_and(|c| c.status == "False")
        })
        .await;
    let (_, reason, message) = status_of(&conditions, cond::GPU_DRIVER_READY);
    assert_eq!(reason, validator::reason::DRIVER_NOT_LOADED, "{message}");
    assert!(message.contains("proc/driver/nvidia/version"), "{message}");
    assert!(!node.validations().join("driver-ready").exists());
    let flipped = condition(&conditions, cond::GPU_DRIVER_READY)
        .unwrap()
        .last_transition_time
        .clone();
    assert_ne!(flipped, transition, "the status flipped");
    node.load_module();
    let status = tokio::time::timeout(TIMEOUT, waiting.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "the waiting validator exits 0 once the driver is fixed"
    );
    assert_eq!(
        status_of(&node.conditions().await, cond::GPU_DRIVER_READY).0,
        "True"
    );

    // The rest of the stack; the taint stays until the stack is ready.
    write_script(&node.dir.join("ctr-bin/nvidia-smi"), &fake_smi(8));
    let (code, log) = node.validate("toolkit", &[]).await;
    assert_eq!(code, 0, "{log}");
    let (code, log) = node.validate("cuda", &[("WITH_WORKLOAD", "false")]).await;
    assert_eq!(code, 0, "{log}");
    assert!(node.validations().join("cuda-ready").exists());
    let (_, reason, message) = status_of(&node.conditions().await, cond::GPU_STACK_READY);
    assert_eq!(reason, validator::reason::VALIDATION_PENDING);
    assert!(message.contains("GPUDevicePluginReady"), "{message}");
    assert!(
        node.taint_keys()
            .await
            .contains(&validator::STARTUP_TAINT_KEY.to_owned())
    );

    let (code, log) = node.validate("plugin", &[("WITH_WORKLOAD", "false")]).await;
    assert_eq!(code, 0, "{log}");
    let conditions = node.conditions().await;
    assert_eq!(
        status_of(&conditions, cond::GPU_DEVICE_PLUGIN_READY).0,
        "True"
    );
    let (status, reason, message) = status_of(&conditions, cond::GPU_STACK_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", validator::reason::STACK_READY),
        "{message}"
    );
    assert!(message.contains(DRIVER), "{message}");
    assert_eq!(
        node.taint_keys().await,
        ["example.com/keep-me"],
        "only the startup taint is lifted"
    );
    assert_eq!(status_of(&conditions, "Ready").0, "True");
    node.delete().await;
}

#[tokio::test]
async fn a_mig_strategy_mismatch_and_a_missing_cuda_image_are_reported() {
    let client = client().await.unwrap();
    let node = SimulatedNode::new(&client).await;
    node.nodes()
        .patch(
            &node.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"nvidia.com/mig.strategy": "single"}}})),
        )
        .await
        .unwrap();
    let (code, log) = node
        .validate(
            "plugin",
            &[("WITH_WORKLOAD", "false"), ("MIG_STRATEGY", "mixed")],
        )
        .await;
    assert_eq!(code, 1, "{log}");
    let (status, reason, message) =
        status_of(&node.conditions().await, cond::GPU_DEVICE_PLUGIN_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", validator::reason::MIG_STRATEGY_MISMATCH)
    );
    assert!(
        message.contains("nvidia.com/mig.strategy=single"),
        "{message}"
    );
    assert!(!node.validations().join("plugin-ready").exists());

    let (code, log) = node
        .validate(
            "plugin",
            &[("WITH_WORKLOAD", "false"), ("MIG_STRATEGY", "single")],
        )
        .await;
    assert_eq!(code, 0, "{log}");
    let (status, _, message) = status_of(&node.conditions().await, cond::GPU_DEVICE_PLUGIN_READY);
    assert_eq!(status, "True");
    assert!(message.contains("nvidia.com/gpu=8"), "{message}");

    // No CUDA image: fails at once, even with WITH_WAIT (waiting cannot fix configuration).
    let (code, log) = node
        .validate(
            "cuda",
            &[("OPERATOR_NAMESPACE", "default"), ("WITH_WAIT", "true")],
        )
        .await;
    assert_eq!(code, 1, "{log}");
    let (status, reason, message) = status_of(&node.conditions().await, cond::GPU_STACK_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", validator::reason::CUDA_NOT_READY)
    );
    assert!(
        message.contains(validator::reason::CUDA_IMAGE_NOT_CONFIGURED),
        "{message}"
    );
    node.delete().await;
}

async fn set_phase(pods: &Api<Pod>, name: &str, phase: &str) {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap();
}

async fn workload_pod(pods: &Api<Pod>, node: &str) -> Pod {
    wait_until("the CUDA workload pod", TIMEOUT, || async {
        let list = pods
            .list(
                &ListParams::default()
                    .labels("app=nvidia-cuda-validator")
                    .fields(&format!("spec.nodeName={node}")),
            )
            .await?;
        Ok(list
            .items
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_none()))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_cuda_check_runs_a_pod_on_the_node_and_judges_its_outcome() {
    let client = client().await.unwrap();
    let node = SimulatedNode::new(&client).await;
    let ns = unique_name("validator-ns");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let env = [
        ("OPERATOR_NAMESPACE", ns.as_str()),
        ("CUDA_VALIDATOR_IMAGE", "registry.invalid/cuda-check:0"),
        ("VALIDATOR_IMAGE_PULL_POLICY", "IfNotPresent"),
        ("WORKLOAD_TIMEOUT_SECONDS", "45"),
    ];

    // The pod succeeds.
    let running = node.command("cuda", &env).spawn().unwrap();
    let pod = workload_pod(&pods, &node.name).await;
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some(node.name.as_str()));
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("IfNotPresent")
    );
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("registry.invalid/cuda-check:0")
    );
    set_phase(&pods, &pod.name_any(), "Succeeded").await;
    let output = tokio::time::timeout(TIMEOUT, running.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(node.validations().join("cuda-ready").exists());

    // The next run replaces the pod. (Its failing for real is on the real node, where our
    // `vectorAdd` runs: e2e/tests/real_node_cuda.rs; kwok runs no container, so here the phase is
    // set by hand and only the validator's handling of the pod is under test.)
    let running = node.command("cuda", &env).spawn().unwrap();
    let second = wait_until("a new CUDA pod", TIMEOUT, || async {
        let p = workload_pod(&pods, &node.name).await;
        Ok((p.uid() != pod.uid()).then_some(p))
    })
    .await
    .unwrap();
    assert!(
        pods.get_opt(&pod.name_any())
            .await
            .unwrap()
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "the previous pod was not deleted"
    );
    set_phase(&pods, &second.name_any(), "Succeeded").await;
    let output = tokio::time::timeout(TIMEOUT, running.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (status, reason, _) = status_of(&node.conditions().await, cond::GPU_CUDA_READY);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", validator::reason::CUDA_VALIDATED)
    );

    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    node.delete().await;
}

/// Scrapes `/metrics` until the exporter answers.
async fn scrape(port: u16) -> String {
    wait_until("the metrics component to answer", TIMEOUT, || async {
        Ok(http_get(port, "/metrics").await.map(|(status, body)| {
            assert!(status.contains(" 200 "), "{status}");
            body
        }))
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_metrics_component_serves_nvidias_node_gauges() {
    let client = client().await.unwrap();
    let node = SimulatedNode::new(&client).await;
    node.install_driver();
    for file in ["driver-ready", "toolkit-ready"] {
        std::fs::write(node.validations().join(file), "").unwrap();
    }
    for (address, vendor) in [
        ("0000:18:00.0", "0x10de"),
        ("0000:2a:00.0", "0x10de"),
        ("0000:00:1f.0", "0x8086"),
    ] {
        let device = node.dir.join("host/sys/bus/pci/devices").join(address);
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("vendor"), format!("{vendor}\n")).unwrap();
    }
    // NVIDIA's command name, as the image links it; COMPONENT selects the exporter.
    let nvidia_validator = node.dir.join("nvidia-validator");
    std::os::unix::fs::symlink(validator_binary(), &nvidia_validator).unwrap();
    let serve = |extra: &[(&str, &str)]| {
        tokio::process::Command::new(&nvidia_validator)
            .env_clear()
            .envs(node.env("metrics", extra))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };

    let port = free_port();
    let mut exporter = serve(&[("METRICS_PORT", &port.to_string())]);
    let text = scrape(port).await;
    let value = |name: &str| {
        gauge(&text, name, &node.name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    assert_eq!(value("gpu_operator_node_driver_ready"), 1);
    assert_eq!(value("gpu_operator_node_toolkit_ready"), 1);
    assert_eq!(value("gpu_operator_node_plugin_ready"), 0);
    assert_eq!(value("gpu_operator_node_cuda_ready"), 0);
    assert_eq!(value("gpu_operator_node_driver_validation"), 1);
    assert!(value("gpu_operator_node_driver_validation_last_success_ts_seconds") > 0);
    assert_eq!(
        value("gpu_operator_node_device_plugin_devices_total"),
        8,
        "the H100 node's capacity"
    );
    assert!(value("gpu_operator_node_device_plugin_validation_last_success_ts_seconds") > 0);
    assert_eq!(value("gpu_operator_nvidia_pci_devices_total"), 2);
    assert!(value("gpu_operator_node_metrics_ready_ts_seconds") > 0);
    assert_eq!(
        value("gpu_operator_node_gpu_healthy"),
        -1,
        "no health agent reports on this node: unknown, not healthy"
    );
    let (status, body) = http_get(port, "/healthz").await.unwrap();
    assert!(
        status.contains(" 200 ") && body.trim() == "ok",
        "{status} {body}"
    );
    // Status files are read on every scrape.
    std::fs::remove_file(node.validations().join("toolkit-ready")).unwrap();
    assert_eq!(
        gauge(
            &scrape(port).await,
            "gpu_operator_node_toolkit_ready",
            &node.name
        ),
        Some(0)
    );
    exporter.kill().await.unwrap();

    // A disabled device plugin is -1, not 0, so the "no devices" alert stays quiet.
    let port = free_port();
    let mut exporter = serve(&[
        ("METRICS_PORT", &port.to_string()),
        ("DEVICE_PLUGIN_ENABLED", "false"),
    ]);
    let text = scrape(port).await;
    assert_eq!(
        gauge(
            &text,
            "gpu_operator_node_device_plugin_devices_total",
            &node.name
        ),
        Some(-1)
    );
    exporter.kill().await.unwrap();
    node.delete().await;
}
