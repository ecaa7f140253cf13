//! The real node `cargo xtask cluster up --real-node` adds beside the kwok fleet: its name, the
//! taint that keeps other tests' pods off it, and the images imported into its containerd.

/// The real node's name.
pub const NODE_NAME: &str = "real-node";
/// The taint on the real node (`key=value:NoSchedule`); real-node tests' pods tolerate it.
pub const TAINT: (&str, &str) = ("gpu-operator-e2e/real-node", "true");
/// The stand-in for NVIDIA's validator image: busybox `sh` and a `nvidia-validator` name only.
pub const NVIDIA_STAND_IN: &str = "localhost/nvidia-validator-stand-in:busybox";
/// The pod sandbox image built from the kubernetes module's `pause.c`.
pub const PAUSE_IMAGE: &str = "localhost/pause:e2e";

/// Our image as imported: the chart's default repository and image at the chart's appVersion,
/// so a `helm install` with default values finds it.
pub fn our_image() -> String {
    format!(
        "ghcr.io/gpu-operator-rs/gpu-operator:{}",
        env!("CARGO_PKG_VERSION")
    )
}
