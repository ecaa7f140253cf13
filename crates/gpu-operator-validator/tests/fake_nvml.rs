//! The health agent binary against an NVML library built here (tests/fake_nvml/libnvidia-ml.c:
//! the entry points nvml-wrapper calls, answering from a state file re-read on every call), found
//! under a fake host root as the agent finds the driver's: below the NVML boundary, nothing of the
//! agent is faked. A healthy GPU reads healthy; a double-bit ECC count flipped on in the state
//! file reads as `DoubleBitECC`; a lost GPU as `GPULost`; an XID as NVIDIA's catalog classifies it.
//! The e2e test `node_health_check` runs the same library under agents writing real Nodes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{path::Path, process::Command};

const FAKE: &str = include_str!("fake_nvml/libnvidia-ml.c");

/// A host root with `usr/lib64/libnvidia-ml.so.1` built from the fake's source.
fn host_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("libnvidia-ml.c");
    std::fs::write(&c, FAKE).unwrap();
    let lib = dir.path().join("usr/lib64");
    std::fs::create_dir_all(&lib).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libnvidia-ml.so.1", "-o"])
        .arg(lib.join("libnvidia-ml.so.1"))
        .arg(&c)
        .status()
        .expect("cc (the C compiler Rust links with) builds the fake NVML library");
    assert!(status.success());
    dir
}

/// `health --once --polls N` against the host root, the state file `state`; its stdout.
fn health_once(root: &Path, state: &str, polls: u32) -> String {
    let state_file = root.join("nvml-state");
    std::fs::write(&state_file, state).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-operator-validator"))
        .args(["health", "--once", "--polls", &polls.to_string()])
        .env_clear()
        .env("HOST_ROOT_CTR_PATH", root)
        .env(
            "DRIVER_INSTALL_DIR_CTR_PATH",
            root.join("no-driver-container"),
        )
        .env("FAKE_NVML_STATE", &state_file)
        .env("HEALTH_POLL_SECONDS", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The `condition TYPE=STATUS reason=REASON` lines of the report's last poll.
fn conditions(report: &str) -> Vec<String> {
    let last = report.rsplit("# poll").next().unwrap();
    last.lines()
        .filter_map(|l| l.strip_prefix("condition "))
        .map(|l| l.split(" message=").next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_healthy_fake_gpu_reads_healthy_and_a_double_bit_ecc_flipped_on_reads_as_one() {
    let root = host_root();
    let healthy = health_once(root.path(), "gpus 2\n", 1);
    assert!(
        healthy.contains(
            "gpu 0 uuid=\"GPU-fa4e0000-0000-0000-0000-000000000000\" lost=false volatile_dbe=0"
        ),
        "every query answered from the fake library:\n{healthy}"
    );
    assert!(healthy.contains("gpu 1 "), "{healthy}");
    assert!(!healthy.contains("unreadable"), "{healthy}");
    assert!(
        healthy.contains("xid events: watched, 0 arrived"),
        "{healthy}"
    );
    assert!(
        conditions(&healthy).contains(&"GPUHealthy=True reason=GPUsHealthy".to_owned()),
        "{healthy}"
    );

    // The same library, the state flipped: GPU 1 has a double-bit ECC error.
    let faulty = health_once(root.path(), "gpus 2\ndbe 1 3\n", 1);
    assert!(faulty.contains("gpu 1 uuid="), "{faulty}");
    assert!(faulty.contains("volatile_dbe=3"), "{faulty}");
    let now = conditions(&faulty);
    assert!(
        now.contains(&"GPUHealthy=False reason=DoubleBitECC".to_owned()),
        "{faulty}"
    );
    assert!(
        now.contains(&"GPUMemoryError=True reason=DoubleBitECC".to_owned()),
        "{faulty}"
    );
}

#[test]
fn a_lost_gpu_and_an_xid_come_through_the_library() {
    let root = host_root();
    let lost = health_once(root.path(), "gpus 2\nlost 0\n", 1);
    assert!(lost.contains("gpu 0 uuid=unreadable"), "{lost}");
    assert!(lost.contains("lost=true"), "{lost}");
    assert!(
        conditions(&lost)
            .iter()
            .any(|c| c.starts_with("GPULost=True")),
        "{lost}"
    );

    // XID 79 (fallen off the bus: NVIDIA's catalog says reset the GPU), waiting in the event set.
    let xid = health_once(root.path(), "gpus 1\nxid 0 79 1\n", 1);
    assert!(xid.contains("xid events: watched, 1 arrived"), "{xid}");
    assert!(xid.contains("xid: 79"), "{xid}");
    assert!(
        conditions(&xid)
            .iter()
            .any(|c| c.starts_with("GPUXidError=True")),
        "{xid}"
    );
}
