//! The device plugin operand, NVIDIA's `state-device-plugin` and `state-mps-control-daemon` (one
//! reconciler: both follow `spec.devicePlugin` and share the `DevicePluginReady` condition):
//! `nvidia-device-plugin-daemonset` on nodes labelled `nvidia.com/gpu.deploy.device-plugin=true`,
//! `nvidia-device-plugin-mps-control-daemon` on those of them that are also
//! `nvidia.com/mps.capable=true`, their entrypoint ConfigMap, ServiceAccounts and RBAC. Pure
//! validate and render steps; the shared pipeline in `gpu_operator_core::pipeline::operand` does
//! the rest.

mod render;
mod validate;

use gpu_operator_api::{
    ClusterPolicy, ClusterPolicySpec, conditions::operand::DEVICE_PLUGIN_READY,
};
use gpu_operator_core::{
    Error,
    build::user_config::Checked,
    cache::facts::NodeSample,
    contract::{Children, Cluster, ImageEnv, Operand, Warning},
};

pub use validate::Input;

/// Name of the device plugin DaemonSet, as NVIDIA names it.
pub const DAEMONSET: &str = "nvidia-device-plugin-daemonset";
/// Name of the device plugin's ServiceAccount and RBAC, as NVIDIA names them.
pub const SERVICE_ACCOUNT: &str = "nvidia-device-plugin";
/// Name of the MPS control daemon DaemonSet, its ServiceAccount and RBAC, as NVIDIA names them.
pub const MPS_DAEMONSET: &str = "nvidia-device-plugin-mps-control-daemon";
/// The operator's checked copy of the ConfigMap `devicePlugin.config.name` names, which the
/// device plugin and the MPS control daemon mount.
pub const CONFIGS: &str = "nvidia-device-plugin-configs";
/// The ConfigMap with the device plugin's entrypoint script, as NVIDIA names it.
pub const ENTRYPOINT_CONFIG_MAP: &str = "nvidia-device-plugin-entrypoint";

/// The device plugin operand.
pub struct DevicePlugin;

impl Operand for DevicePlugin {
    type Owner = ClusterPolicy;
    const NAME: &'static str = "device-plugin";
    const CONDITION: &'static str = DEVICE_PLUGIN_READY;
    const SECTION: &'static str = "devicePlugin";
    type Input = Input;
    const IMAGES: &'static [ImageEnv] = &[ImageEnv {
        var: "DEVICE_PLUGIN_IMAGE",
        chart_values: Some("devicePlugin"),
    }];

    fn validate(spec: &ClusterPolicySpec, cluster: &Cluster<'_>) -> Result<Option<Input>, Error> {
        validate::validate(spec, cluster)
    }

    fn render(input: &Input) -> Children {
        render::children(input)
    }

    fn warnings(input: &Input) -> Vec<Warning> {
        let mut warnings = config_warnings(input.configs.as_ref());
        if let Some(nodes) = &input.unconfigured_nodes {
            warnings.push(unconfigured(&input.config_name, nodes));
        }
        warnings
    }
}

/// GPU nodes that silently run the plugin's built-in settings instead of the named config.
fn unconfigured(name: &str, nodes: &NodeSample) -> Warning {
    Warning {
        reason: "ConfigNotApplied",
        message: format!(
            "devicePlugin.config.name is {name} but devicePlugin.config.default is not set, and \
             {} carry no {label} label: the device plugin runs there with its built-in settings, \
             not a configuration of {name}; set devicePlugin.config.default to one of {name}'s \
             keys, or label the nodes (kubectl label node <node> {label}=<key>)",
            nodes.describe(),
            label = gpu_operator_api::labels::DEVICE_PLUGIN_CONFIG,
        ),
    }
}

/// What the checked `devicePlugin.config` ConfigMap holds that the device plugin would ignore.
fn config_warnings(configs: Option<&Checked>) -> Vec<Warning> {
    configs
        .iter()
        .flat_map(|c| &c.warnings)
        .map(|message| Warning {
            reason: "ConfigIgnored",
            message: format!("{message} (the device plugin accepts it but ignores it)"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use gpu_operator_api::spec::DevicePluginConfig;
    use gpu_operator_core::{
        cache::{facts::ClusterFacts, node_meta::NodeMeta},
        contract, fixtures,
    };

    use super::*;

    /// The warnings for `config` (name, default) on two GPU nodes, `b` unlabelled and `a`
    /// labelled when `label_a`.
    fn warnings(config: (Option<&str>, Option<&str>), label_a: bool) -> Vec<Warning> {
        let mut spec = ClusterPolicySpec::default();
        spec.device_plugin.config = Some(DevicePluginConfig {
            name: config.0.map(str::to_owned),
            default: config.1.map(str::to_owned),
        });
        let gpu = ("nvidia.com/gpu.present", "true");
        let plugin = ("nvidia.com/gpu.deploy.device-plugin", "true");
        let a_labels: &[(&str, &str)] = if label_a {
            &[gpu, plugin, ("nvidia.com/device-plugin.config", "any")]
        } else {
            &[gpu, plugin]
        };
        let nodes = [
            NodeMeta::new("b", &[gpu, plugin]),
            NodeMeta::new("a", a_labels),
            // A GPU node the device plugin does not run on is not counted.
            NodeMeta::new(
                "c",
                &[gpu, ("nvidia.com/gpu.deploy.device-plugin", "false")],
            ),
        ];
        let facts = ClusterFacts::from_nodes(&nodes, []);
        let cluster = contract::Cluster {
            namespace: "gpu-operator",
            facts: &facts,
            image_env: &fixtures::image_env,
            config_maps: &fixtures::plugin_configs,
            policy: None,
            server: gpu_operator_core::cache::server_facts::ServerFacts::unknown(),
        };
        let input = DevicePlugin::validate(&spec, &cluster).unwrap().unwrap();
        DevicePlugin::warnings(&input)
    }

    #[test]
    fn a_named_config_without_default_names_the_unlabelled_gpu_nodes_and_the_fix() {
        let found = warnings((Some("time-slicing-config"), None), false);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].reason, "ConfigNotApplied");
        let message = &found[0].message;
        for part in [
            "devicePlugin.config.name is time-slicing-config",
            "2 node(s) (a, b)",
            "nvidia.com/device-plugin.config",
            "set devicePlugin.config.default",
        ] {
            assert!(message.contains(part), "{part} not in {message}");
        }
        let one = warnings((Some("time-slicing-config"), None), true);
        assert!(one[0].message.contains("1 node(s) (b)"), "{one:?}");
    }

    #[test]
    fn a_default_or_no_config_or_labelled_nodes_say_nothing() {
        assert!(warnings((Some("time-slicing-config"), Some("any")), false).is_empty());
        assert!(warnings((None, None), false).is_empty());
        assert!(warnings((Some(""), None), false).is_empty());
    }
}
