//! `validator_images.yaml` loaded, and the check of one rendered container against one image.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    ffi::OsString,
};

use gpu_operator_validator::config::{self, Invocation};
use serde::Deserialize;
use serde_json::Value;

use super::shell;

/// Which validator image a container would be started from.
#[derive(Debug, Clone, Copy)]
pub enum Image {
    /// `nvcr.io/nvidia/gpu-operator:v26.x`.
    Nvidia,
    /// Ours, built by the Dockerfile.
    Ours,
}

#[derive(Debug, Deserialize)]
pub struct Contract {
    shell_builtins: BTreeSet<String>,
    images: Images,
    env_either_image_may_ignore: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct Images {
    nvidia: ImageContract,
    ours: ImageContract,
}

#[derive(Debug, Deserialize)]
pub struct ImageContract {
    pub executables: BTreeSet<String>,
    validator: ValidatorContract,
}

#[derive(Debug, Deserialize)]
struct ValidatorContract {
    binary: String,
    #[serde(default)]
    components: BTreeSet<String>,
    #[serde(default)]
    env: BTreeSet<String>,
    #[serde(default)]
    env_outside_the_parser: BTreeSet<String>,
}

impl Contract {
    pub fn load() -> Self {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/validator_images.yaml");
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    /// This contract with `executable` gone from `image` (a positive control: a test must fail).
    pub fn without_executable(mut self, image: Image, executable: &str) -> Self {
        let contract = match image {
            Image::Nvidia => &mut self.images.nvidia,
            Image::Ours => &mut self.images.ours,
        };
        assert!(contract.executables.remove(executable), "{executable}");
        self
    }

    pub fn image(&self, image: Image) -> &ImageContract {
        match image {
            Image::Nvidia => &self.images.nvidia,
            Image::Ours => &self.images.ours,
        }
    }

    /// What `container` needs that `image` does not provide (empty: it runs there).
    pub fn check(&self, image: Image, container: &Value) -> Vec<String> {
        let contract = self.image(image);
        let mut argv: Vec<String> = strings(&container["command"]);
        argv.extend(strings(&container["args"]));
        let Some(program) = argv.first().map(|p| basename(p).to_owned()) else {
            return vec!["no command: it would run the image's entrypoint, which differs".into()];
        };
        let mut problems = Vec::new();
        if !contract.executables.contains(&program) {
            problems.push(format!("runs `{program}`, which the image does not have"));
        }
        if program == "sh" && argv.get(1).map(String::as_str) == Some("-c") {
            let script = argv.get(2).cloned().unwrap_or_default();
            for word in shell::command_words(&script) {
                if !self.shell_builtins.contains(&word) && !contract.executables.contains(&word) {
                    problems.push(format!(
                        "its script runs `{word}`, which the image does not have"
                    ));
                }
            }
        } else if program == contract.validator.binary {
            let env = env_of(container);
            problems.extend(match image {
                Image::Nvidia => self.nvidia_validator(&argv[1..], &env),
                Image::Ours => self.our_validator(&argv[1..], &env),
            });
        }
        problems
    }

    fn nvidia_validator(&self, args: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
        let contract = &self.images.nvidia.validator;
        let mut problems = Vec::new();
        if let Some(arg) = args.first() {
            problems.push(format!(
                "passes `{arg}`: NVIDIA's validator takes no subcommand"
            ));
        }
        match env.get("COMPONENT") {
            Some(c) if contract.components.contains(c) => {}
            other => problems.push(format!("COMPONENT={other:?} is not one of NVIDIA's")),
        }
        for name in env.keys() {
            if !contract.env.contains(name) && !self.env_either_image_may_ignore.contains_key(name)
            {
                problems.push(format!(
                    "relies on {name}, which NVIDIA's validator does not read"
                ));
            }
        }
        problems
    }

    /// Runs our real argument parser on the container's arguments and environment, recording
    /// which variables it reads.
    fn our_validator(&self, args: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
        let read = RefCell::new(BTreeSet::new());
        let lookup = |name: &str| {
            read.borrow_mut().insert(name.to_owned());
            env.get(name).map(OsString::from)
        };
        let mut problems = Vec::new();
        match config::parse(args, lookup) {
            Ok(Invocation::Help) => problems.push("prints usage instead of running".into()),
            Ok(_) => {}
            Err(e) => problems.push(format!("our validator refuses it: {e}")),
        }
        let read = read.into_inner();
        for name in env.keys() {
            let known = read.contains(name)
                || self
                    .images
                    .ours
                    .validator
                    .env_outside_the_parser
                    .contains(name)
                || self.env_either_image_may_ignore.contains_key(name);
            if !known {
                problems.push(format!(
                    "relies on {name}, which our validator does not read"
                ));
            }
        }
        problems
    }
}

/// The programs the Dockerfile installs into the image: every `/out/usr/bin/<name>` it writes
/// (a binary or a link), and the names of the applet loop.
pub fn dockerfile_executables(dockerfile: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in dockerfile.lines() {
        for word in line.split_whitespace() {
            let word = word.trim_end_matches(';').trim_matches('"');
            if let Some(name) = word.strip_prefix("/out/usr/bin/") {
                if name == "$applet" {
                    let list = line.split(" in ").nth(1).and_then(|l| l.split(';').next());
                    out.extend(
                        list.into_iter()
                            .flat_map(str::split_whitespace)
                            .map(str::to_owned),
                    );
                } else {
                    out.insert(name.to_owned());
                }
            }
        }
    }
    out
}

/// The strings of a JSON list (a container's `command` or `args`).
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The container's environment as the kubelet would give it: literal values, and downward-API
/// fields filled with plausible values.
pub fn env_of(container: &Value) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for var in container["env"].as_array().into_iter().flatten() {
        let name = var["name"].as_str().unwrap_or_default().to_owned();
        let value = match (&var["value"], &var["valueFrom"]["fieldRef"]["fieldPath"]) {
            (Value::String(v), _) => v.clone(),
            (_, Value::String(field)) => match field.as_str() {
                "spec.nodeName" => "gpu-node-1".into(),
                "metadata.namespace" => "gpu-operator".into(),
                _ => "pod-1".into(),
            },
            _ => String::new(),
        };
        env.insert(name, value);
    }
    env
}
