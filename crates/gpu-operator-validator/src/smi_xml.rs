//! `nvidia-smi -q -x`, the machine-readable form of `nvidia-smi -q` (NVIDIA's `nvsmi_device_v*`
//! DTD): the driver and CUDA versions and, per GPU, what identifies it and what says it is
//! healthy — MIG mode, uncorrectable ECC errors, row remapping — read with `roxmltree`.

use std::path::Path;

use roxmltree::{Document, Node};

use crate::{nvml::GpuInfo, smi::SmiError};

/// One GPU of the report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmiGpu {
    /// PCI bus id, e.g. `00000000:00:06.0`.
    pub pci_bus_id: String,
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub product_name: String,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// Current and pending MIG mode (`Enabled`/`Disabled`), `None` where MIG is not supported.
    pub mig_mode: Option<(String, String)>,
    /// Uncorrectable DRAM ECC errors since the driver loaded (`None`: not reported, ECC off).
    pub volatile_uncorrectable_ecc: Option<u64>,
    /// A row remap is pending a GPU reset.
    pub remap_pending: bool,
    /// Row remapping failed: the GPU has run out of spare rows.
    pub remap_failed: bool,
}

/// What `nvidia-smi -q -x` reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmiReport {
    /// The driver, CUDA and GPU names, as the other driver queries give them.
    pub info: GpuInfo,
    /// Every GPU, in the report's order.
    pub gpus: Vec<SmiGpu>,
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| c.has_tag_name(name))
}

/// The trimmed text of the element at `path` under `node`; `None` when absent, empty or `N/A`.
fn text<'a>(node: Node<'a, '_>, path: &[&str]) -> Option<&'a str> {
    let mut at = node;
    for name in path {
        at = child(at, name)?;
    }
    at.text()
        .map(str::trim)
        .filter(|t| !t.is_empty() && *t != "N/A")
}

fn yes(node: Node<'_, '_>, path: &[&str]) -> bool {
    text(node, path) == Some("Yes")
}

fn gpu(node: Node<'_, '_>) -> SmiGpu {
    let owned = |path: &[&str]| text(node, path).unwrap_or_default().to_owned();
    let mig = text(node, &["mig_mode", "current_mig"])
        .zip(text(node, &["mig_mode", "pending_mig"]))
        .map(|(current, pending)| (current.to_owned(), pending.to_owned()));
    SmiGpu {
        pci_bus_id: node.attribute("id").unwrap_or_default().to_owned(),
        product_name: owned(&["product_name"]),
        uuid: owned(&["uuid"]),
        mig_mode: mig,
        volatile_uncorrectable_ecc: text(node, &["ecc_errors", "volatile", "dram_uncorrectable"])
            .and_then(|v| v.parse().ok()),
        remap_pending: yes(node, &["remapped_rows", "remapped_row_pending"]),
        remap_failed: yes(node, &["remapped_rows", "remapped_row_failure"]),
    }
}

/// Parses `nvidia-smi -q -x` output printed by `program`.
pub fn parse_query_xml(program: &Path, xml: &str) -> Result<SmiReport, SmiError> {
    let unparsable = |why: String| SmiError::Unparsable {
        program: program.display().to_string(),
        output: why,
    };
    let document = Document::parse_with_options(
        xml,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..roxmltree::ParsingOptions::default()
        },
    )
    .map_err(|e| unparsable(format!("not XML: {e}")))?;
    let root = document.root_element();
    if !root.has_tag_name("nvidia_smi_log") {
        return Err(unparsable(format!(
            "the root element is <{}>, not <nvidia_smi_log>",
            root.tag_name().name()
        )));
    }
    let driver_version = text(root, &["driver_version"])
        .ok_or_else(|| unparsable("no <driver_version>".to_owned()))?
        .to_owned();
    let gpus: Vec<SmiGpu> = root
        .children()
        .filter(|c| c.has_tag_name("gpu"))
        .map(gpu)
        .collect();
    let attached = text(root, &["attached_gpus"]).and_then(|n| n.parse::<usize>().ok());
    if let Some(attached) = attached.filter(|n| *n != gpus.len()) {
        return Err(unparsable(format!(
            "<attached_gpus> says {attached} but {} <gpu> elements follow",
            gpus.len()
        )));
    }
    Ok(SmiReport {
        info: GpuInfo {
            driver_version,
            cuda_version: text(root, &["cuda_version"]).map(str::to_owned),
            gpus: Some(gpus.iter().map(|g| g.product_name.clone()).collect()),
        },
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &str = r#"<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>570.172.08</driver_version>
  <cuda_version>12.8</cuda_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <mig_mode><current_mig>Enabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
    <uuid>GPU-1</uuid>
    <ecc_errors><volatile><dram_uncorrectable>3</dram_uncorrectable></volatile></ecc_errors>
    <remapped_rows><remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure></remapped_rows>
  </gpu>
  <gpu id="00000000:19:00.0">
    <product_name>Tesla T4</product_name>
    <mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
    <uuid>GPU-2</uuid>
    <ecc_errors><volatile><dram_uncorrectable>N/A</dram_uncorrectable></volatile></ecc_errors>
  </gpu>
</nvidia_smi_log>"#;

    #[test]
    fn reads_identity_mig_ecc_and_row_remapping_per_gpu() {
        let report = parse_query_xml(Path::new("nvidia-smi"), TWO).unwrap();
        assert_eq!(report.info.driver_version, "570.172.08");
        assert_eq!(report.info.cuda_version.as_deref(), Some("12.8"));
        let [a100, t4] = report.gpus.as_slice() else {
            panic!("{report:?}")
        };
        assert_eq!(a100.pci_bus_id, "00000000:18:00.0");
        assert_eq!(
            a100.mig_mode,
            Some(("Enabled".to_owned(), "Disabled".to_owned()))
        );
        assert_eq!(a100.volatile_uncorrectable_ecc, Some(3));
        assert!(a100.remap_pending && !a100.remap_failed);
        assert_eq!(t4.mig_mode, None, "N/A: no MIG");
        assert_eq!(t4.volatile_uncorrectable_ecc, None);
        assert!(!t4.remap_pending && !t4.remap_failed);
    }

    #[test]
    fn refuses_what_is_not_a_complete_report() {
        let parse = |xml: &str| parse_query_xml(Path::new("nvidia-smi"), xml).unwrap_err();
        assert!(
            parse("Driver Version : 570")
                .to_string()
                .contains("not XML")
        );
        assert!(parse("<other/>").to_string().contains("<other>"));
        assert!(
            parse("<nvidia_smi_log><attached_gpus>1</attached_gpus></nvidia_smi_log>")
                .to_string()
                .contains("no <driver_version>")
        );
        let truncated = TWO.replace("<attached_gpus>2", "<attached_gpus>3");
        assert!(parse(&truncated).to_string().contains("says 3 but 2"));
    }
}
