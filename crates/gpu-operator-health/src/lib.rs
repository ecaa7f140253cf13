//! GPU health on one node, for the health agent (`gpu-operator-validator health`, a container of
//! the validator's DaemonSet).
//!
//! Each poll reads, per GPU through NVML ([`source`]): the UUID, volatile and aggregate
//! double-bit ECC counts, retired pages pending, row-remap pending and failure, the driver's
//! recovery action (XID 154's field), thermal and power-brake clock slowdowns and whether the GPU
//! answers `GpuLost`; and the XID events that arrived since the last poll. [`faults`] classifies
//! them (XIDs with NVIDIA's catalog, [`catalog`]); [`condition`] turns them into Node conditions
//! with hysteresis.
//!
//! | condition | True when | reasons |
//! |---|---|---|
//! | `GPUHealthy` (summary, follows `Ready`) | no fault below makes the node unhealthy | `GPUsHealthy`; when False the first fault's reason; `HealthUnknown` (status Unknown) when NVML cannot be read |
//! | `GPUXidError` | an XID whose catalog action is the node's, until the node reboots | `XidResetGPU`, `XidRebootNode`, `XidContactSupport`, `XidCheckMechanicals`, `XidInvestigate`, `DriverRecoveryAction`; False: `NoXidErrors` |
//! | `GPUMemoryError` | uncorrectable memory errors | `DoubleBitECC`, `RetiredPagesPending`, `RowRemapPending`, `RowRemapFailure`; False: `NoMemoryErrors` |
//! | `GPULost` | a GPU fell off the bus, or fewer answer than `nvidia.com/gpu.count` | `GPUFallenOffBus`, `GPUCountBelowLabel`; False: `AllGPUsPresent` |
//! | `GPUThrottled` (informational) | thermal or power-brake slowdown | `ThermalSlowdown`, `PowerBrakeSlowdown`; False: `NotThrottled` |
//!
//! The types avoid those other health tools set on the same Node: node-problem-detector's
//! (`GPUMissing`, `GPUXIDErrors` on AKS), GKE's `XidCriticalError`, NVSentinel's check names
//! (`GpuMemWatch` and its other `Gpu…Watch` checks).

pub mod catalog;
pub mod condition;
pub mod faults;
pub mod reading;
pub mod report;
pub mod source;
pub mod taint;
