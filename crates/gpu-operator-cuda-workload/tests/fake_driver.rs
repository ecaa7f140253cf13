//! The workload binary against a driver library built here (tests/fake_driver/libcuda.c: the
//! driver API entry points the workload calls, device memory in host memory, a launch that adds,
//! miscomputes, writes nothing or fails as told), loaded through `LD_LIBRARY_PATH` as the
//! container runtime's mount would be. Every way of failing gives its own exit code and message,
//! and the passing path runs end to end on the host; the same on a real GPU needs the device
//! machine (DEVELOPERS.md).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::{path::Path, process::Command};

use gpu_operator_cuda_workload::{
    EXIT_CUDA_ERROR, EXIT_DRIVER_TOO_OLD, EXIT_NO_DEVICE, EXIT_NO_LIBRARY, EXIT_WRONG_RESULT,
};

const FAKE: &str = include_str!("fake_driver/libcuda.c");

/// Builds `libcuda.so.1` from `source` into a new directory.
fn driver(source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("libcuda.c");
    std::fs::write(&c, source).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
        .arg(dir.path().join("libcuda.so.1"))
        .arg(&c)
        .status()
        .expect("cc (the C compiler Rust links with) builds the fake driver library");
    assert!(status.success());
    dir
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the workload with `library_path` first on the loader's path and `env` set.
fn workload(library_path: &Path, env: &[(&str, &str)]) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_gpu-operator-cuda-workload"))
        .env("LD_LIBRARY_PATH", library_path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let ran = Ran {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    if ran.code != Some(0) {
        assert!(!ran.stdout.contains("PASSED"), "{}", ran.stdout);
        assert!(ran.stderr.starts_with("Test FAILED: "), "{}", ran.stderr);
    }
    ran
}

fn expect(ran: &Ran, code: u8, says: &str) {
    assert_eq!(ran.code, Some(i32::from(code)), "{}", ran.stderr);
    assert!(ran.stderr.contains(says), "{}", ran.stderr);
}

#[test]
fn a_working_gpu_passes_on_every_device() {
    let fake = driver(FAKE);
    let ran = workload(fake.path(), &[("FAKE_DEVICES", "2")]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert_eq!(
        ran.stdout,
        "[Vector addition of 50000 elements on 2 device(s)]\n\
         Device 0 (Fake GPU): CUDA kernel launch with 196 blocks of 256 threads\n\
         Device 0: result verified\n\
         Device 1 (Fake GPU): CUDA kernel launch with 196 blocks of 256 threads\n\
         Device 1: result verified\n\
         Test PASSED\nDone\n"
    );
}

#[test]
fn a_gpu_with_memory_pools_passes_through_stream_ordered_allocation() {
    let fake = driver(FAKE);
    let ran = workload(fake.path(), &[("FAKE_MEMORY_POOLS", "1")]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(
        ran.stdout.ends_with("Test PASSED\nDone\n"),
        "{}",
        ran.stdout
    );
    let without = driver(&FAKE.replace("cuMemAllocAsync(", "cuMemAllocAsyncOld("));
    let ran = workload(without.path(), &[("FAKE_MEMORY_POOLS", "1")]);
    expect(
        &ran,
        EXIT_DRIVER_TOO_OLD,
        "libcuda.so.1 lacks cuMemAllocAsync",
    );
}

#[test]
fn a_wrong_or_missing_result_fails_verification() {
    let fake = driver(FAKE);
    let ran = workload(fake.path(), &[("FAKE_GPU", "wrong")]);
    expect(
        &ran,
        EXIT_WRONG_RESULT,
        "result verification failed on device 0 at element 7: expected 22, got 23",
    );
    let ran = workload(fake.path(), &[("FAKE_GPU", "nothing")]);
    expect(&ran, EXIT_WRONG_RESULT, "at element 0: expected 1, got 0");
}

#[test]
fn a_failed_launch_names_the_step_and_the_driver_error() {
    let fake = driver(FAKE);
    let ran = workload(fake.path(), &[("FAKE_GPU", "fail")]);
    expect(
        &ran,
        EXIT_CUDA_ERROR,
        "launching the kernel failed on device 0: DriverError(CUDA_ERROR_LAUNCH_FAILED",
    );
}

#[test]
fn without_the_driver_library_it_names_the_library_and_the_loader_error() {
    let empty = tempfile::tempdir().unwrap();
    let ran = workload(empty.path(), &[]);
    expect(
        &ran,
        EXIT_NO_LIBRARY,
        "libcuda.so.1: cannot open shared object file",
    );
}

#[test]
fn a_driver_without_gpus_is_no_device() {
    let fake = driver(FAKE);
    let ran = workload(fake.path(), &[("FAKE_DEVICES", "0")]);
    expect(&ran, EXIT_NO_DEVICE, "sees no GPU");
    assert!(
        ran.stderr.contains("CUDA_ERROR_NO_DEVICE"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_driver_lacking_entry_points_names_them_and_does_not_abort() {
    let old = driver(&FAKE.replace("cuLaunchKernel(", "cuLaunchKernelOld("));
    let ran = workload(old.path(), &[]);
    expect(
        &ran,
        EXIT_DRIVER_TOO_OLD,
        "libcuda.so.1 lacks cuLaunchKernel",
    );
}
