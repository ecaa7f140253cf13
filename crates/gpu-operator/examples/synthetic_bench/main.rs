//! The operator's cost past what a local control plane holds: its caches, trigger filters, node
//! label pass, every operand's validate + render, the status summaries and the driver upgrade
//! (its own node and pod caches, one pass of its state machine) fed synthetic Nodes and Pods in
//! memory at 1,000 to 50,000 GPU nodes, with no API server. Each size runs in a fresh process
//! (so its memory is its own); prints a Markdown table. Run by `cargo xtask bench --synthetic`.
//!
//! `synthetic_bench [--dra] [--nodes 1000,5000,20000,50000]` (GPU nodes; the fleet adds one
//! CPU-only node for every six, the live bench's mix). `--dra` puts every GPU node on the DRA
//! stack of a GPUCluster beside the ClusterPolicy, which still serves the driver and toolkit:
//! the ClusterPolicy's caches stay, and the GPUCluster's are added (see [`dra`]).

mod dra;
mod fleet;
mod measure;
mod node_caches;
mod pods;
mod upgrade;

use std::{fmt::Write as _, process::Command, sync::LazyLock};

use anyhow::{Context as _, bail};
use gpu_operator_api::{ClusterPolicy, ClusterPolicySpec};
use gpu_operator_core::{cache::facts::ClusterFacts, contract::Operand};
use gpu_operator_node_labels::resource_api::ResourceApi;
use serde_json::Value;

/// Renders an operand's objects as JSON for a spec and the node facts.
type Render = fn(&ClusterPolicySpec, &ClusterFacts) -> Vec<Value>;

/// Every operand `gpu-operator run` reconciles (the operand registry's), by reconciler name.
pub static OPERANDS: LazyLock<Vec<(&'static str, Render)>> = LazyLock::new(|| {
    struct Renders(Vec<(&'static str, Render)>);
    impl gpu_operator_operands::Visit for Renders {
        fn operand<O: Operand<Owner = ClusterPolicy>>(&mut self) {
            self.0.push((O::NAME, measure::rendered::<O>));
        }
    }
    let mut renders = Renders(Vec::new());
    gpu_operator_operands::visit_all(&mut renders);
    renders.0
});

/// The ClusterPolicy of the live bench.
const POLICY: &str = include_str!("../../../../manifests/examples/minimal.yaml");

const USAGE: &str = "usage: synthetic_bench [--dra] [--nodes 1000,5000,20000,50000]";

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let api = if let Some(at) = args.iter().position(|a| a == "--dra") {
        args.remove(at);
        ResourceApi::Dra
    } else {
        ResourceApi::DevicePlugin
    };
    let policy: ClusterPolicy = serde_yaml::from_str(POLICY)?;
    match args.as_slice() {
        [flag, n] if flag == "--one" => {
            let nodes = n.parse().context("--one takes a node count")?;
            let sample = measure::sample(nodes, &policy, api)?;
            println!("{}", serde_json::to_string(&sample)?);
            Ok(())
        }
        [] => table(&[1000, 5000, 20000, 50000], api),
        [flag, sizes] if flag == "--nodes" => table(
            &sizes
                .split(',')
                .map(|s| s.trim().replace('_', "").parse::<u32>())
                .collect::<Result<Vec<_>, _>>()
                .context("--nodes takes GPU node counts, such as 1000,5000")?,
            api,
        ),
        _ => bail!(USAGE),
    }
}

/// Runs each size in a child process and prints the table.
fn table(sizes: &[u32], api: ResourceApi) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut samples = Vec::new();
    for size in sizes {
        eprintln!("==> synthetic: {size} GPU nodes");
        let mut one = Command::new(&exe);
        one.args(["--one", &size.to_string()]);
        if api == ResourceApi::Dra {
            one.arg("--dra");
        }
        let out = one.output()?;
        if !out.status.success() {
            bail!(
                "the {size}-node sample failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let sample: Value = serde_json::from_slice(&out.stdout)?;
        samples.push(sample);
    }
    println!("{}", markdown(&samples));
    if let Some((base_mib, kib)) = beyond_base(&samples, "kib_per_gpu_node") {
        println!(
            "\nBeyond a fixed base: {kib:.2} KiB per GPU node (the least-squares slope of the \
             caches' growth over these sizes; base {base_mib:.1} MiB)."
        );
    }
    if api == ResourceApi::Dra
        && let Some((base_mib, kib)) = beyond_base(&samples, "dra_kib_per_gpu_node")
    {
        println!(
            "Of which the ResourceSlice cache: {kib:.2} KiB per GPU node (base {base_mib:.1} MiB)."
        );
    }
    Ok(())
}

/// The caches' growth (the figure `key`, KiB per GPU node) as a fixed base (MiB) plus a cost per
/// GPU node (KiB): the least-squares line through each size's growth. Needs two sizes or more.
fn beyond_base(samples: &[Value], key: &str) -> Option<(f64, f64)> {
    let points: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            let nodes = s["gpu_nodes"].as_f64().unwrap_or_default();
            (nodes, s[key].as_f64().unwrap_or_default() * nodes)
        })
        .collect();
    let n = f64::from(u32::try_from(points.len()).unwrap_or(u32::MAX));
    let (mean_x, mean_y) = (
        points.iter().map(|p| p.0).sum::<f64>() / n,
        points.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let spread: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if points.len() < 2 || spread == 0.0 {
        return None;
    }
    let slope = points
        .iter()
        .map(|p| (p.0 - mean_x) * (p.1 - mean_y))
        .sum::<f64>()
        / spread;
    Some(((mean_y - slope * mean_x) / 1024.0, slope))
}

fn markdown(samples: &[Value]) -> String {
    let num = |v: &Value, key: &str| v[key].as_f64().unwrap_or_default();
    let mut out = String::from("| figure |");
    for s in samples {
        let _ = write!(out, " {} GPU nodes |", s["gpu_nodes"]);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(samples.len()));
    let mut row = |name: &str, cell: &dyn Fn(&Value) -> String| {
        let _ = write!(out, "\n| {name} |");
        for s in samples {
            let _ = write!(out, " {} |", cell(s));
        }
    };
    row("memory per GPU node (caches + filters)", &|s| {
        format!("{:.2} KiB", num(s, "kib_per_gpu_node"))
    });
    row("… shared node caches + their filters", &|s| {
        format!("{:.2} KiB", num(s, "core_kib_per_gpu_node"))
    });
    row("… driver upgrade: node + pod caches, filter", &|s| {
        format!("{:.2} KiB", num(s, "upgrade_kib_per_gpu_node"))
    });
    let on_dra = samples.iter().any(|s| s["dra"] == true);
    if on_dra {
        row(
            "… DRA: ResourceSlice cache + its stream (8-GPU slices)",
            &|s| format!("{:.2} KiB", num(s, "dra_kib_per_gpu_node")),
        );
    }
    row("one node event (caches, filters, label decision)", &|s| {
        format!("{:.1} µs", num(s, "node_event_us"))
    });
    row("requests one node event causes", &|s| {
        s["event_requests"].to_string()
    });
    row("node label pass, every node", &|s| {
        format!("{:.1} ms", num(s, "label_pass_ms"))
    });
    row("cluster facts from the node caches", &|s| {
        format!("{:.2} ms", num(s, "facts_ms"))
    });
    row("validators' summary, every node", &|s| {
        format!("{:.2} ms", num(s, "node_summary_ms"))
    });
    row(
        &format!(
            "one node change: {} operand reconciles, facts shared",
            OPERANDS.len()
        ),
        &|s| format!("{:.2} ms", num(s, "trigger_shared_ms")),
    );
    row("the same, facts computed per reconcile (before)", &|s| {
        format!("{:.2} ms", num(s, "trigger_per_reconcile_ms"))
    });
    row("driver upgrade pass, every node, at rest", &|s| {
        format!("{:.2} ms", num(s, "upgrade_pass_ms"))
    });
    row("the same after a driver change (nodes it moves)", &|s| {
        format!(
            "{:.2} ms ({})",
            num(s, "upgrade_rollout_ms"),
            s["upgrade_rollout_writes"]
        )
    });
    row("one node event on the upgrade's full-Node watch", &|s| {
        format!("{:.1} µs", num(s, "upgrade_node_event_us"))
    });
    if on_dra {
        row("DRA readiness pass, every node (slices cached)", &|s| {
            format!("{:.2} ms ({})", num(s, "dra_pass_ms"), s["dra_slices"])
        });
    }
    for (i, (name, _)) in OPERANDS.iter().enumerate() {
        row(&format!("full reconcile: {name} (facts reused)"), &|s| {
            let ms = s["operand_ms"][i][1].as_f64().unwrap_or_default();
            format!("{ms:.2} ms")
        });
    }
    out
}
