//! The CUDA workload our image runs as `vectorAdd` in the validator's workload pods: it proves a
//! GPU computes. It loads the driver's `libcuda.so.1` at run time (nothing from a CUDA toolkit at
//! build time), has the driver JIT-compile an embedded PTX vector-add kernel, runs it on every
//! visible device and checks every element. Each way of failing has its own exit code and
//! message ([`Failure`]); nothing passes without having run.

mod device;
mod failure;
mod library;

use std::io::Write;

pub use failure::{
    EXIT_CUDA_ERROR, EXIT_DRIVER_TOO_OLD, EXIT_NO_DEVICE, EXIT_NO_LIBRARY, EXIT_USAGE,
    EXIT_WRONG_RESULT, Failure,
};

/// The kernel, in PTX.
pub const PTX: &str = include_str!("vector_add.ptx");
/// The kernel's entry point in [`PTX`].
pub const KERNEL: &str = "vector_add";
/// Elements added per device (the CUDA sample's count).
pub const ELEMENTS: usize = 50_000;
/// Threads per block of the launch.
pub const THREADS_PER_BLOCK: u32 = 256;

/// The inputs: whole numbers, so every sum is exact in `f32` and checked for equality.
pub fn inputs(elements: usize) -> (Vec<f32>, Vec<f32>) {
    // Below 2^24 every integer is an exact f32; the largest sum here is 3 * ELEMENTS.
    #[allow(clippy::cast_precision_loss, reason = "exact below 2^24")]
    let value = |i: usize| i as f32;
    (0..elements).map(|i| (value(i), value(2 * i + 1))).unzip()
}

/// The first element where `sum` is not `a + b`, with what was expected and found.
pub fn first_wrong(a: &[f32], b: &[f32], sum: &[f32]) -> Option<(usize, f32, f32)> {
    if sum.len() != a.len() {
        return Some((sum.len().min(a.len()), f32::NAN, f32::NAN));
    }
    a.iter()
        .zip(b)
        .zip(sum)
        .enumerate()
        .find(|(_, ((x, y), got))| (*x + *y).to_bits() != got.to_bits())
        .map(|(i, ((x, y), got))| (i, x + y, *got))
}

/// Runs the workload on every visible device, writing progress to `out`; the names of the
/// devices that passed.
pub fn run(out: &mut dyn Write) -> Result<Vec<String>, Failure> {
    let _library = library::open()?;
    library::guarded(|| run_loaded(out))?
}

fn run_loaded(out: &mut dyn Write) -> Result<Vec<String>, Failure> {
    let count = library::device_count()?;
    let (a, b) = inputs(ELEMENTS);
    // Progress is best effort: a closed stdout must not fail a GPU that works.
    let _ = writeln!(
        out,
        "[Vector addition of {ELEMENTS} elements on {count} device(s)]"
    );
    let mut passed = Vec::with_capacity(count);
    for device in 0..count {
        let computed = device::add(device, &a, &b)?;
        let _ = writeln!(
            out,
            "Device {device} ({}): CUDA kernel launch with {} blocks of {THREADS_PER_BLOCK} threads",
            computed.name, computed.blocks
        );
        if let Some((index, expected, got)) = first_wrong(&a, &b, &computed.sum) {
            return Err(Failure::WrongResult {
                device,
                index,
                expected,
                got,
            });
        }
        let _ = writeln!(out, "Device {device}: result verified");
        passed.push(computed.name);
    }
    let _ = writeln!(out, "Test PASSED\nDone");
    Ok(passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_sum_exactly_and_a_wrong_element_is_found() {
        let (a, b) = inputs(ELEMENTS);
        let mut sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(first_wrong(&a, &b, &sum), None);
        assert_eq!(
            sum[ELEMENTS - 1].to_bits(),
            149_998_f32.to_bits(),
            "3(n-1)+1, exact"
        );
        sum[4_242] += 1.0;
        assert_eq!(first_wrong(&a, &b, &sum), Some((4_242, 12_727.0, 12_728.0)));
        assert_eq!(
            first_wrong(&a, &b, &sum[..10]).map(|(i, _, _)| i),
            Some(10),
            "a short result is wrong where it ends"
        );
        let zeros = vec![0.0; ELEMENTS];
        assert_eq!(first_wrong(&a, &b, &zeros), Some((0, 1.0, 0.0)));
    }

    #[test]
    fn the_ptx_declares_the_kernel_with_the_parameters_the_launch_passes() {
        let entry = PTX
            .split(".visible .entry ")
            .nth(1)
            .expect("an entry point");
        assert!(entry.starts_with(&format!("{KERNEL}(")), "{entry}");
        let params: Vec<&str> = entry
            .split(')')
            .next()
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".param "))
            .map(|p| p.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(params, [".u64", ".u64", ".u64", ".u32"]);
    }
}
