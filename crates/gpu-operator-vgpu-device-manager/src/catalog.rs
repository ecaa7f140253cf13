//! The vGPU types this operator knows, and the default vGPU device configurations generated from
//! them (ConfigMap `default-vgpu-devices-config`, key `config.yaml`): one configuration per vGPU
//! type, named after it, that fills every GPU of the node with that type, and `default`, a common
//! type per GPU model picked by PCI device ID. The facts are two data files of this crate
//! (`data/vgpu-types.txt`, `data/default-config.txt`), written from NVIDIA GPU Operator v26.7.0's
//! default configurations; their headers say how to read them. Pure.

use std::{fmt::Write as _, sync::LazyLock};

use gpu_operator_api::spec::VgpuDevicesConfigSpec;

use crate::vgpu_type;

/// The vGPU types by GPU model.
const TYPES: &str = include_str!("../data/vgpu-types.txt");
/// The entries of the `default` configuration.
const DEFAULT: &str = include_str!("../data/default-config.txt");

/// One GPU model and its vGPU types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// The GPU part of its type names (`A100`, `RTX6000-Ada`).
    pub gpu: String,
    /// Its vGPU types (full names) with how many one GPU holds, in the table's order.
    pub types: Vec<(String, u32)>,
}

/// One entry of the `default` configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultEntry {
    /// The PCI device ID of the GPUs it applies to (vendor NVIDIA).
    pub device: u16,
    /// The vGPU type created on each.
    pub vgpu_type: String,
    /// How many.
    pub count: u32,
}

/// The two tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    /// GPU models in the table's order.
    pub models: Vec<Model>,
    /// The `default` configuration's entries, in order.
    pub default: Vec<DefaultEntry>,
}

static CATALOG: LazyLock<Result<Catalog, String>> = LazyLock::new(|| parse(TYPES, DEFAULT));
static DEFAULT_CONFIG: LazyLock<String> = LazyLock::new(|| render(catalog()));

/// The known vGPU types and the `default` entries (empty if the data files did not parse, which
/// a test rules out).
pub fn catalog() -> &'static Catalog {
    static EMPTY: Catalog = Catalog {
        models: Vec::new(),
        default: Vec::new(),
    };
    CATALOG.as_ref().unwrap_or(&EMPTY)
}

/// The vGPU types of GPU model `gpu`, when it is known.
pub fn types_of(gpu: &str) -> Option<&'static [(String, u32)]> {
    catalog()
        .models
        .iter()
        .find(|m| m.gpu == gpu)
        .map(|m| m.types.as_slice())
}

/// The `config.yaml` of `default-vgpu-devices-config`.
pub fn default_config() -> &'static str {
    &DEFAULT_CONFIG
}

/// The configuration names of [`default_config`]: `default` and every known vGPU type.
pub fn default_config_names() -> impl Iterator<Item = &'static str> {
    std::iter::once(VgpuDevicesConfigSpec::DEFAULT_CONFIG).chain(
        catalog()
            .models
            .iter()
            .flat_map(|m| m.types.iter().map(|(name, _)| name.as_str())),
    )
}

/// The data lines of a table (no comments, no blank lines), numbered from 1.
fn data_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// `<name>:<count>`, the count positive.
fn type_count(item: &str) -> Option<(&str, u32)> {
    let (name, count) = item.split_once(':')?;
    let count: u32 = count.parse().ok().filter(|c| *c > 0)?;
    Some((name, count))
}

fn parse(types: &str, default: &str) -> Result<Catalog, String> {
    let mut models: Vec<Model> = Vec::new();
    for (number, line) in data_lines(types) {
        let mut words = line.split_whitespace();
        let gpu = words.next().unwrap_or_default();
        let position = if let Some(position) = models.iter().position(|m| m.gpu == gpu) {
            position
        } else {
            models.push(Model {
                gpu: gpu.to_owned(),
                types: Vec::new(),
            });
            models.len() - 1
        };
        for item in words {
            let (suffix, count) =
                type_count(item).ok_or_else(|| format!("vgpu-types.txt:{number}: {item:?}"))?;
            let name = format!("{gpu}-{suffix}");
            if vgpu_type::parse(&name).map(|t| t.gpu) != Some(gpu) {
                return Err(format!(
                    "vgpu-types.txt:{number}: {name} is no type of {gpu}"
                ));
            }
            models[position].types.push((name, count));
        }
    }
    let mut entries = Vec::new();
    for (number, line) in data_lines(default) {
        let bad = || format!("default-config.txt:{number}: {line:?}");
        let (device, item) = line.split_once(' ').ok_or_else(bad)?;
        let device = u16::from_str_radix(device, 16).map_err(|_| bad())?;
        let (vgpu_type, count) = type_count(item.trim()).ok_or_else(bad)?;
        entries.push(DefaultEntry {
            device,
            vgpu_type: vgpu_type.to_owned(),
            count,
        });
    }
    Ok(Catalog {
        models,
        default: entries,
    })
}

/// The configuration file: block style for the file, flow style for each entry (one line per
/// configuration). Type names need no quotes: each holds a letter and a dash, so YAML reads it
/// as a string.
fn render(catalog: &Catalog) -> String {
    let mut yaml = String::from(
        "# vGPU device configurations, generated by the GPU operator: one per vGPU type, named \
         after it,\n# that fills every GPU of the node with that type, and `default`, a common \
         type per GPU model.\n# Select one per node: kubectl label node <node> \
         nvidia.com/vgpu.config=<configuration>\nversion: v1\nvgpu-configs:\n",
    );
    for model in &catalog.models {
        let _ = writeln!(yaml, "  # {}", model.gpu);
        for (name, count) in &model.types {
            let _ = writeln!(
                yaml,
                "  {name}: [{{devices: all, vgpu-devices: {{{name}: {count}}}}}]"
            );
        }
    }
    let _ = writeln!(yaml, "  {}:", VgpuDevicesConfigSpec::DEFAULT_CONFIG);
    for entry in &catalog.default {
        let _ = writeln!(
            yaml,
            "    - {{device-filter: \"0x{:04X}10DE\", devices: all, vgpu-devices: {{{}: {}}}}}",
            entry.device, entry.vgpu_type, entry.count
        );
    }
    yaml
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_files_parse() {
        let catalog = CATALOG.as_ref().unwrap();
        assert_eq!(catalog.models.len(), 51);
        let types: usize = catalog.models.iter().map(|m| m.types.len()).sum();
        assert_eq!(types, 710);
        assert_eq!(catalog.default.len(), 56);
        assert_eq!(types_of("DC").unwrap().len(), 75);
        assert!(types_of("M60").is_none());
    }

    #[test]
    fn every_type_of_the_default_configuration_is_known() {
        for entry in &catalog().default {
            let gpu = vgpu_type::parse(&entry.vgpu_type).unwrap().gpu;
            let known = types_of(gpu).unwrap();
            assert!(
                known.iter().any(|(name, _)| name == &entry.vgpu_type),
                "{}",
                entry.vgpu_type
            );
        }
    }

    #[test]
    fn a_bad_line_is_named() {
        assert_eq!(
            parse("A10 4C:0\n", ""),
            Err("vgpu-types.txt:1: \"4C:0\"".to_owned())
        );
        assert_eq!(
            parse("A10 4-C:1\n", ""),
            Err("vgpu-types.txt:1: A10-4-C is no type of A10".to_owned())
        );
        assert!(parse("", "XYZ A10-4C:1\n").is_err());
    }
}
