//! Support of the validator e2e tests: the validator binary (built by `cargo xtask e2e`), a simulated
//! node of the test's own with a fake host root, condition helpers, and a scraper of the `metrics`
//! component.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::missing_panics_doc,
    reason = "test support: a step that cannot be taken fails the test that takes it"
)]

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
    process::Stdio,
    sync::OnceLock,
    time::Duration,
};

use gpu_operator_api::validator;
use gpu_operator_harness::{fleet::Profile, operator::workspace_binary, unique_name, wait_until};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, Taint};
use kube::api::{Api, DeleteParams, PostParams};

/// How long one validator run or wait may take.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The driver version of the fake host driver.
pub const DRIVER: &str = "570.172.08";

/// The validator binary that `cargo xtask e2e` builds before it runs the tests.
pub fn validator_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let binary = workspace_binary("gpu-operator-validator");
        assert!(
            binary.is_file(),
            "{} is not built: run the e2e tests with `cargo xtask e2e`, which builds it",
            binary.display()
        );
        binary
    })
}

/// A simulated node of our own (deleted on drop) and its fake filesystem.
pub struct SimulatedNode {
    client: kube::Client,
    /// The Node's name.
    pub name: String,
    /// The node's fake host filesystem and the validator's output directory.
    pub dir: PathBuf,
}

impl SimulatedNode {
    /// A new tainted H100 node (the validator's startup taint) and its fake filesystem.
    pub async fn new(client: &kube::Client) -> Self {
        let name = unique_name("validator");
        let mut node = Profile::H100.node(&name);
        node.spec = Some(NodeSpec {
            taints: Some(vec![
                Taint {
                    key: validator::STARTUP_TAINT_KEY.into(),
                    effect: validator::STARTUP_TAINT_EFFECT.into(),
                    ..Taint::default()
                },
                Taint {
                    key: "example.com/keep-me".into(),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                },
            ]),
            ..NodeSpec::default()
        });
        let nodes: Api<Node> = Api::all(client.clone());
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let dir = std::env::temp_dir().join(&name);
        for sub in [
            "host/usr/bin",
            "host/proc/driver/nvidia",
            "driver",
            "validations",
            "ctr-bin",
        ] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let this = Self {
            client: client.clone(),
            name,
            dir,
        };
        // kwok marks the node Ready; our conditions must leave that one alone.
        this.wait_for("kwok to make the node Ready", |c| {
            condition(c, "Ready").is_some_and(|c| c.status == "True")
        })
        .await;
        this
    }

    /// The Nodes.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// The status-file directory (`/run/nvidia/validations` of this node).
    pub fn validations(&self) -> PathBuf {
        self.dir.join("validations")
    }

    /// A driver on the host: `nvidia-smi` printing 8 H100s, and the loaded module's version file.
    pub fn install_driver(&self) {
        write_script(&self.dir.join("host/usr/bin/nvidia-smi"), &fake_smi(8));
        self.load_module();
    }

    /// Writes the loaded driver module's version file.
    pub fn load_module(&self) {
        std::fs::write(
            self.dir.join("host/proc/driver/nvidia/version"),
            format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Tue Jul  8 17:34:33 UTC 2025\n"),
        )
        .unwrap();
    }

    /// Removes the loaded driver module's version file.
    pub fn unload_module(&self) {
        std::fs::remove_file(self.dir.join("host/proc/driver/nvidia/version")).unwrap();
    }

    /// The environment of a validator for this node; `extra` wins.
    pub fn env(&self, component: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let dir = |sub: &str| self.dir.join(sub).display().to_string();
        let mut env: BTreeMap<String, String> = [
            ("COMPONENT", component.to_owned()),
            ("NODE_NAME", self.name.clone()),
            ("KUBECONFIG", std::env::var("KUBECONFIG").unwrap()),
            ("HOST_ROOT_CTR_PATH", dir("host")),
            ("DRIVER_INSTALL_DIR_CTR_PATH", dir("driver")),
            ("OUTPUT_DIR", dir("validations")),
            ("PATH", format!("{}:/usr/bin:/bin", dir("ctr-bin"))),
            ("SLEEP_INTERVAL_SECONDS", "1".to_owned()),
            ("GPU_RESOURCE_WAIT_SECONDS", "0".to_owned()),
            ("LIFT_STARTUP_TAINT", "true".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        env
    }

    /// The validator command for `component` on this node, with [`Self::env`].
    pub fn command(&self, component: &str, extra: &[(&str, &str)]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(validator_binary());
        command
            .env_clear()
            .envs(self.env(component, extra))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs the validator to completion; returns its exit code and log.
    pub async fn validate(&self, component: &str, extra: &[(&str, &str)]) -> (i32, String) {
        let output = tokio::time::timeout(TIMEOUT, self.command(component, extra).output())
            .await
            .expect("the validator did not finish")
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.code().unwrap_or(-1), log)
    }

    /// The Node as the API server has it.
    pub async fn get(&self) -> Node {
        self.nodes().get(&self.name).await.unwrap()
    }

    /// The Node's conditions.
    pub async fn conditions(&self) -> Vec<NodeCondition> {
        self.get()
            .await
            .status
            .unwrap()
            .conditions
            .unwrap_or_default()
    }

    /// Waits until `check` accepts the Node's conditions; returns them.
    pub async fn wait_for(
        &self,
        what: &str,
        check: impl Fn(&[NodeCondition]) -> bool,
    ) -> Vec<NodeCondition> {
        wait_until(what, TIMEOUT, || async {
            let conditions = self.conditions().await;
            Ok(check(&conditions).then_some(conditions))
        })
        .await
        .unwrap()
    }

    /// The keys of the Node's taints.
    pub async fn taint_keys(&self) -> Vec<String> {
        self.get()
            .await
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect()
    }

    /// Deletes the Node and its fake filesystem.
    pub async fn delete(self) {
        self.nodes()
            .delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Condition `type_` among `conditions`, if there.
pub fn condition<'a>(conditions: &'a [NodeCondition], type_: &str) -> Option<&'a NodeCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Status, reason and message of condition `type_` (which must be there).
pub fn status_of(conditions: &[NodeCondition], type_: &str) -> (String, String, String) {
    let c = condition(conditions, type_).unwrap_or_else(|| panic!("no {type_} in {conditions:#?}"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

/// Writes an executable `sh` script `body` at `path`.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A fake `nvidia-smi -q` for `count` H100 GPUs.
pub fn fake_smi(count: usize) -> String {
    let mut out = format!(
        "Driver Version                            : {DRIVER}\nCUDA Version                              : 12.8\n\nAttached GPUs                             : {count}\n"
    );
    for i in 0..count {
        let _ = write!(
            out,
            "GPU 00000000:{:02X}:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n",
            0x18 + i
        );
    }
    format!("cat <<'EOF'\n{out}EOF")
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on `127.0.0.1:port` over plain HTTP/1.1: the status line and body, or `None`
/// while nothing answers.
pub async fn http_get(port: u16, path: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

/// The value of gauge `name` with label `node` in a Prometheus text exposition.
pub fn gauge(text: &str, name: &str, node: &str) -> Option<i64> {
    let prefix = format!("{name}{{node=\"{node}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}
