//! One device's part of the workload: a context, the PTX module JIT-compiled by the driver, the
//! inputs copied in, one launch, the output copied back. The launch is `unsafe` (the driver cannot
//! check a kernel's parameter list against its arguments): one of the workspace's two `unsafe`
//! blocks, both in this crate (the other loads the driver library).
#![allow(unsafe_code)]

use cudarc::{
    driver::{CudaContext, DriverError, LaunchConfig, PushKernelArg as _},
    nvrtc::Ptx,
};

use crate::{Failure, KERNEL, PTX, THREADS_PER_BLOCK};

/// What one device computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// The blocks of the launch.
    pub blocks: u32,
    /// The output vector.
    pub sum: Vec<f32>,
}

fn on(device: usize, step: &'static str) -> impl FnOnce(DriverError) -> Failure {
    move |e| Failure::Cuda {
        step,
        device: Some(device),
        error: e.to_string(),
    }
}

/// Runs the vector-add kernel on `device` over `a` and `b` (of equal length).
pub fn add(device: usize, a: &[f32], b: &[f32]) -> Result<Computed, Failure> {
    let n = u32::try_from(a.len()).map_err(|_| Failure::Cuda {
        step: "sizing the launch",
        device: Some(device),
        error: format!("{} elements do not fit a 32-bit index", a.len()),
    })?;
    let ctx = CudaContext::new(device).map_err(on(device, "creating a context"))?;
    let name = ctx.name().map_err(on(device, "reading the device name"))?;
    let module = ctx
        .load_module(Ptx::from_src(PTX))
        .map_err(on(device, "JIT-loading the vector-add kernel"))?;
    let kernel = module
        .load_function(KERNEL)
        .map_err(on(device, "finding the kernel in the module"))?;
    let stream = ctx.default_stream();
    let input_a = stream
        .clone_htod(a)
        .map_err(on(device, "copying input A to the device"))?;
    let input_b = stream
        .clone_htod(b)
        .map_err(on(device, "copying input B to the device"))?;
    let mut output = stream
        .alloc_zeros::<f32>(a.len())
        .map_err(on(device, "allocating the output on the device"))?;
    let blocks = n.div_ceil(THREADS_PER_BLOCK);
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS_PER_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(&kernel);
    launch.arg(&input_a).arg(&input_b).arg(&mut output).arg(&n);
    // SAFETY: the arguments match `vector_add`'s parameters in vector_add.ptx (three global f32
    // pointers, then a u32 count); the kernel touches elements below `n` only, and all three
    // buffers hold `n` elements.
    unsafe { launch.launch(config) }.map_err(on(device, "launching the kernel"))?;
    stream
        .synchronize()
        .map_err(on(device, "running the kernel"))?;
    let sum = stream
        .clone_dtoh(&output)
        .map_err(on(device, "copying the result to the host"))?;
    Ok(Computed { name, blocks, sum })
}
