//! Builds the control-plane binaries from their Go modules, once, into the cache (keyed by version).
//!
//! No prebuilt Kubernetes binaries can be downloaded here, but the Go module proxy is reachable, so
//! etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and helm are compiled
//! from source. The first build takes 25–40 minutes on 2 cores; afterwards every step is a no-op.
//! promtool (for the alert-rule and dashboard tests) is built the same way but on its own
//! ([`ensure_promtool`]), so its build failing never leaves the control plane unbuilt.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context as _, bail};

use super::layout::{ETCD, HELM, KUBERNETES, KWOK, Layout, PROMETHEUS};
use crate::process;

/// The Kubernetes binaries built from `k8s.io/kubernetes`.
const KUBERNETES_COMMANDS: [&str; 4] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
];

/// Whether every binary is already in the cache.
pub fn is_complete(layout: &Layout) -> bool {
    missing(layout).is_empty()
}

fn missing(layout: &Layout) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = KUBERNETES_COMMANDS
        .iter()
        .map(|name| layout.kubernetes_bin().join(name))
        .collect();
    paths.push(layout.etcd_bin().join("etcd"));
    paths.push(layout.kwok_bin().join("kwok"));
    paths.push(layout.kwok_bin().join("stages.yaml"));
    paths.push(layout.helm_bin().join("helm"));
    paths.retain(|path| !path.is_file());
    paths
}

/// Builds whatever is missing from the cache, showing progress.
pub fn ensure(layout: &Layout) -> anyhow::Result<()> {
    if is_complete(layout) {
        return Ok(());
    }
    let go = Go::find()?;
    let started = Instant::now();
    eprintln!(
        "==> building the control plane from Go modules into {} (first time only: 25–40 min on 2 cores)",
        super::layout::display(&layout.kubernetes_bin().with_file_name(""))
    );
    build_etcd(layout, &go)?;
    build_kwok(layout, &go)?;
    build_kubernetes(layout, &go)?;
    write_kwok_stages(layout, &go)?;
    build_helm(layout, &go)?;
    eprintln!(
        "==> control plane built in {}",
        process::minutes(started.elapsed())
    );
    Ok(())
}

/// The command that builds promtool, for messages of tests that need it.
pub const PROMTOOL_BUILD_COMMAND: &str = "cargo xtask promtool";

/// Builds promtool from its Go module into the cache unless it is there; returns its path.
pub fn ensure_promtool(layout: &Layout) -> anyhow::Result<PathBuf> {
    let target = layout.promtool_bin().join("promtool");
    if target.is_file() {
        return Ok(target);
    }
    let go = Go::find()?;
    let started = Instant::now();
    eprintln!(
        "==> building promtool (Prometheus module {PROMETHEUS}) into {} (first time only: about 5 min on 2 cores)",
        super::layout::display(&layout.promtool_bin())
    );
    go.install(
        layout,
        "promtool",
        &layout.promtool_bin(),
        &format!("github.com/prometheus/prometheus/cmd/promtool@{PROMETHEUS}"),
        "-s -w",
    )
    .with_context(|| {
        format!(
            "building promtool failed (the control plane is not affected); see the log above and run `{PROMTOOL_BUILD_COMMAND}` again"
        )
    })?;
    eprintln!(
        "==> promtool built in {}",
        process::minutes(started.elapsed())
    );
    Ok(target)
}

fn build_etcd(layout: &Layout, go: &Go) -> anyhow::Result<()> {
    let target = layout.etcd_bin().join("etcd");
    if target.is_file() {
        return Ok(());
    }
    eprintln!("  -> etcd {ETCD} (about 2 min)");
    let module = go.wrapper_module(layout, &format!("etcd-{ETCD}"), "e2e/etcdbin")?;
    go.step(
        layout,
        "etcd: go get",
        &module,
        &["get", &format!("go.etcd.io/etcd/server/v3@{ETCD}")],
    )?;
    go.build(
        layout,
        "etcd: go build",
        &module,
        &["-ldflags", "-s -w"],
        &target,
        &["go.etcd.io/etcd/server/v3"],
    )
}

fn build_kwok(layout: &Layout, go: &Go) -> anyhow::Result<()> {
    let target = layout.kwok_bin().join("kwok");
    if target.is_file() {
        return Ok(());
    }
    eprintln!("  -> kwok {KWOK} (about 4 min)");
    go.install(
        layout,
        "kwok",
        &layout.kwok_bin(),
        &format!("sigs.k8s.io/kwok/cmd/kwok@{KWOK}"),
        "-s -w",
    )
}

fn build_helm(layout: &Layout, go: &Go) -> anyhow::Result<()> {
    if layout.helm_bin().join("helm").is_file() {
        return Ok(());
    }
    eprintln!("  -> helm {HELM} (about 5 min)");
    let ldflags = format!("-s -w -X helm.sh/helm/v3/internal/version.version={HELM}");
    go.install(
        layout,
        "helm",
        &layout.helm_bin(),
        &format!("helm.sh/helm/v3/cmd/helm@{HELM}"),
        &ldflags,
    )
}

fn build_kubernetes(layout: &Layout, go: &Go) -> anyhow::Result<()> {
    let bin = layout.kubernetes_bin();
    if KUBERNETES_COMMANDS
        .iter()
        .all(|name| bin.join(name).is_file())
    {
        return Ok(());
    }
    eprintln!(
        "  -> kube-apiserver, kube-controller-manager, kube-scheduler, kubectl {KUBERNETES} (15–30 min)"
    );
    let module = go.wrapper_module(layout, &format!("kubernetes-{KUBERNETES}"), "e2e/k8sbins")?;
    pin_staging_modules(go, &module)?;
    let packages: Vec<String> = KUBERNETES_COMMANDS
        .iter()
        .map(|name| format!("k8s.io/kubernetes/cmd/{name}"))
        .collect();
    let mut get = vec!["get".to_owned()];
    get.extend(packages.iter().map(|p| format!("{p}@{KUBERNETES}")));
    let get: Vec<&str> = get.iter().map(String::as_str).collect();
    go.step(layout, "kubernetes: go get", &module, &get)?;

    let ldflags = version_ldflags();
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    // One `go build` for all four so the shared packages compile once.
    go.build(
        layout,
        "kubernetes: go build",
        &module,
        &["-ldflags", &ldflags],
        &bin,
        &packages,
    )
}

/// Builds the kubelet for the real node from `k8s.io/kubernetes` at the control plane's version,
/// once, into the Kubernetes binaries' directory; returns its path. Its own wrapper module keeps
/// the control plane's module (and so its build) untouched.
pub fn ensure_kubelet(layout: &Layout) -> anyhow::Result<PathBuf> {
    let target = layout.kubernetes_bin().join("kubelet");
    if target.is_file() {
        return Ok(target);
    }
    let go = Go::find()?;
    let started = Instant::now();
    eprintln!(
        "  -> kubelet {KUBERNETES} (about 4 min; seconds when the control plane's build cache is warm)"
    );
    let module = go.wrapper_module(layout, &format!("kubelet-{KUBERNETES}"), "e2e/kubeletbin")?;
    pin_staging_modules(&go, &module)?;
    let package = "k8s.io/kubernetes/cmd/kubelet";
    go.step(
        layout,
        "kubelet: go get",
        &module,
        &["get", &format!("{package}@{KUBERNETES}")],
    )?;
    go.build(
        layout,
        "kubelet: go build",
        &module,
        &["-ldflags", &version_ldflags()],
        &target,
        &[package],
    )?;
    eprintln!(
        "    kubelet built in {}",
        process::minutes(started.elapsed())
    );
    Ok(target)
}

/// k8s.io/kubernetes requires its staging modules at v0.0.0 through local replaces, which do not
/// apply to a dependent module: pin each staging module to the matching published v0.x.y.
fn pin_staging_modules(go: &Go, module: &Path) -> anyhow::Result<()> {
    let staging_version = format!("v0.{}", KUBERNETES.trim_start_matches("v1."));
    for staging in go.kubernetes_staging_modules()? {
        let replace = format!("-replace={staging}={staging}@{staging_version}");
        process::output(
            go.command()
                .current_dir(module)
                .args(["mod", "edit", &replace]),
        )?;
    }
    Ok(())
}

/// Stamps the version so `/version`, helm's kubeVersion checks, kubectl's skew check and the
/// node's `kubeletVersion` see it.
fn version_ldflags() -> String {
    let minor = KUBERNETES.split('.').nth(1).unwrap_or_default();
    let v = "k8s.io/component-base/version";
    format!(
        "-s -w -X {v}.gitVersion={KUBERNETES} -X {v}.gitMajor=1 -X {v}.gitMinor={minor} \
         -X {v}.gitTreeState=clean -X {v}.buildDate=1970-01-01T00:00:00Z \
         -X k8s.io/client-go/pkg/version.gitVersion={KUBERNETES}"
    )
}

/// kwok v0.8 has no built-in stages: render the "fast" stage set shipped in its module.
fn write_kwok_stages(layout: &Layout, go: &Go) -> anyhow::Result<()> {
    let target = layout.kwok_bin().join("stages.yaml");
    if target.is_file() {
        return Ok(());
    }
    let modcache = process::output(go.command().args(["env", "GOMODCACHE"]))?;
    let dir =
        Path::new(modcache.trim()).join(format!("sigs.k8s.io/kwok@{KWOK}/kustomize/stage/fast"));
    if !dir.is_dir() {
        bail!(
            "kwok's stage configuration is missing from the Go module cache ({}); delete {} and run again",
            dir.display(),
            layout.kwok_bin().display()
        );
    }
    let yaml = process::output(
        Command::new(layout.kubernetes_bin().join("kubectl"))
            .arg("kustomize")
            .arg(&dir),
    )?;
    write_atomically(&target, yaml.as_bytes())
}

/// The log file of one build step, e.g. `build-logs/etcd-go-build.log`.
fn build_log(layout: &Layout, what: &str) -> PathBuf {
    layout
        .build_logs()
        .join(format!("{}.log", what.replace(": ", "-").replace(' ', "-")))
}

fn write_atomically(target: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let tmp = target.with_extension("tmp");
    fs::write(&tmp, contents)?;
    fs::rename(&tmp, target)?;
    Ok(())
}

/// The Go toolchain, run with settings that never download a toolchain and build static binaries.
pub(super) struct Go {
    program: PathBuf,
}

impl Go {
    pub(super) fn find() -> anyhow::Result<Self> {
        let program = PathBuf::from("go");
        if let Ok(version) = process::output(Command::new(&program).arg("version")) {
            let minor = version
                .split_whitespace()
                .nth(2)
                .and_then(|v| v.strip_prefix("go1."))
                .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
            if minor.is_some_and(|minor| minor < 26) {
                bail!(
                    "{} is too old to build Kubernetes {KUBERNETES}: install Go 1.26 or newer (https://go.dev/doc/install) and run again",
                    version.trim()
                );
            }
            eprintln!("    using {}", version.trim());
            return Ok(Self { program });
        }
        bail!(
            "Go is not installed, and it is needed once to build the local control plane: install Go 1.26 or newer (https://go.dev/doc/install) and run again"
        )
    }

    pub(super) fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .env("GOTOOLCHAIN", "local")
            .env("CGO_ENABLED", "0")
            .env("GOFLAGS", "-trimpath -buildvcs=false");
        command
    }

    /// A module directory holding only a go.mod that requires what is to be built.
    pub(super) fn wrapper_module(
        &self,
        layout: &Layout,
        name: &str,
        module: &str,
    ) -> anyhow::Result<PathBuf> {
        let dir = layout.go_src(name);
        fs::create_dir_all(&dir)?;
        if !dir.join("go.mod").is_file() {
            process::output(
                self.command()
                    .current_dir(&dir)
                    .args(["mod", "init", module]),
            )?;
        }
        Ok(dir)
    }

    pub(super) fn step(
        &self,
        layout: &Layout,
        what: &str,
        dir: &Path,
        args: &[&str],
    ) -> anyhow::Result<()> {
        let log = build_log(layout, what);
        process::run_logged(what, self.command().current_dir(dir).args(args), &log)
    }

    /// `go build -v -o <out>`, into a temporary path renamed on success so a cut build leaves nothing.
    pub(super) fn build(
        &self,
        layout: &Layout,
        what: &str,
        dir: &Path,
        flags: &[&str],
        out: &Path,
        packages: &[&str],
    ) -> anyhow::Result<()> {
        let single = packages.len() == 1;
        let staging = if single {
            out.with_extension("tmp")
        } else {
            out.with_extension("tmp.d")
        };
        if let Some(parent) = staging.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut output = staging.clone().into_os_string();
        if !single {
            fs::create_dir_all(&staging)?;
            output.push("/");
        }
        let mut args: Vec<&std::ffi::OsStr> = vec!["build".as_ref(), "-v".as_ref()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        args.extend(["-o".as_ref(), output.as_os_str()]);
        args.extend(packages.iter().map(std::ffi::OsStr::new));
        let log = build_log(layout, what);
        process::run_logged(what, self.command().current_dir(dir).args(args), &log)?;
        if single {
            fs::rename(&staging, out)?;
        } else {
            fs::create_dir_all(out)?;
            for entry in fs::read_dir(&staging)? {
                let entry = entry?;
                fs::rename(entry.path(), out.join(entry.file_name()))?;
            }
            fs::remove_dir(&staging)?;
        }
        Ok(())
    }

    fn install(
        &self,
        layout: &Layout,
        what: &str,
        bin: &Path,
        package: &str,
        ldflags: &str,
    ) -> anyhow::Result<()> {
        fs::create_dir_all(bin)?;
        let log = build_log(layout, what);
        process::run_logged(
            &format!("{what}: go install"),
            self.command()
                .env("GOBIN", bin)
                .args(["install", "-v", "-ldflags", ldflags, package]),
            &log,
        )
    }

    /// The staging modules `k8s.io/kubernetes` replaces locally, read from its own go.mod.
    fn kubernetes_staging_modules(&self) -> anyhow::Result<Vec<String>> {
        let json = process::output(
            Command::new(&self.program)
                .env("GOTOOLCHAIN", "local")
                .args([
                    "mod",
                    "download",
                    "-json",
                    &format!("k8s.io/kubernetes@{KUBERNETES}"),
                ]),
        )?;
        let info: serde_json::Value =
            serde_json::from_str(&json).context("parsing `go mod download -json`")?;
        let go_mod = info["GoMod"]
            .as_str()
            .context("`go mod download -json` gave no GoMod path")?;
        let text = fs::read_to_string(go_mod).with_context(|| format!("reading {go_mod}"))?;
        let modules: Vec<String> = text
            .lines()
            .filter_map(|line| {
                let (module, target) = line.trim().split_once("=>")?;
                target
                    .trim()
                    .starts_with("./staging/")
                    .then(|| module.trim().to_owned())
            })
            .collect();
        if modules.is_empty() {
            bail!("found no staging replaces in {go_mod}");
        }
        Ok(modules)
    }
}
