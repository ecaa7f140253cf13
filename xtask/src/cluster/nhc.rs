//! medik8s Node Health Check (the remediation engine the `node_health_check` e2e test drives),
//! built on demand from its Go module into the cache like promtool: the `manager` binary and the
//! module's own `NodeHealthCheck` CRD beside it, nothing of it committed here.
//!
//! The module comes from the Go module proxy, built in a wrapper module (a module zip leaves out
//! the `vendor/` directory the repository keeps). The proxy refuses one of its dependencies
//! (`k8s.io/kube-aggregator@v0.34.7`, which `openshift/library-go` needs: 403 "This module
//! version is not available"), so the wrapper replaces it with the next patch release the proxy
//! serves ([`AGGREGATOR_REPLACEMENT`]), as the control-plane build pins modules. Where that is not
//! enough, `GPU_OPERATOR_NHC_SOURCE` names a checkout of the same tag (`git clone --branch <tag>
//! https://github.com/medik8s/node-healthcheck-operator`), built offline from what it vendors.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context as _, bail};

use super::{
    build::Go,
    layout::{Layout, NHC},
};
use crate::process;

/// The Go module of Node Health Check.
pub const NHC_MODULE: &str = "github.com/medik8s/node-healthcheck-operator";
/// A checkout of [`NHC_MODULE`] at [`NHC`] to build from when the module proxy refuses it.
pub const NHC_SOURCE_ENV: &str = "GPU_OPERATOR_NHC_SOURCE";
/// The patch release of `k8s.io/kube-aggregator` built instead of the refused v0.34.7.
pub const AGGREGATOR_REPLACEMENT: &str = "k8s.io/kube-aggregator=k8s.io/kube-aggregator@v0.34.8";
/// The CRD file, under `config/crd/bases` of the module and beside the binary in the cache.
pub const NHC_CRD: &str = "remediation.medik8s.io_nodehealthchecks.yaml";

/// Builds Node Health Check into the cache unless it is there; returns its directory.
pub fn ensure_nhc(layout: &Layout) -> anyhow::Result<PathBuf> {
    let dir = layout.nhc_bin();
    if dir.join("manager").is_file() && dir.join(NHC_CRD).is_file() {
        return Ok(dir);
    }
    let go = Go::find()?;
    let started = Instant::now();
    let (source, vendored) = match std::env::var_os(NHC_SOURCE_ENV) {
        Some(checkout) => checked_checkout(Path::new(&checkout))?,
        None => (download(&go)?, false),
    };
    // From the proxy: built in a wrapper module that pins the refused dependency.
    let (build_dir, package) = if vendored {
        (source.clone(), "./cmd".to_owned())
    } else {
        let wrapper = go.wrapper_module(layout, &format!("nhc-{NHC}"), "e2e/nhcbin")?;
        go.step(
            layout,
            "node-healthcheck: go mod edit",
            &wrapper,
            &["mod", "edit", &format!("-replace={AGGREGATOR_REPLACEMENT}")],
        )?;
        go.step(
            layout,
            "node-healthcheck: go get",
            &wrapper,
            &["get", &format!("{NHC_MODULE}/cmd@{NHC}")],
        )?;
        (wrapper, format!("{NHC_MODULE}/cmd"))
    };
    eprintln!(
        "==> building Node Health Check {NHC} from {} into {} (first time only: about 5 min on 2 cores)",
        source.display(),
        super::layout::display(&dir)
    );
    let ldflags = format!("-s -w -X {NHC_MODULE}/version.Version={NHC}");
    let mut flags = vec!["-ldflags", &ldflags];
    if vendored {
        flags.push("-mod=vendor");
    }
    go.build(
        layout,
        "node-healthcheck: go build",
        &build_dir,
        &flags,
        &dir.join("manager"),
        &[&package],
    )
    .with_context(|| {
        if vendored {
            "building Node Health Check failed; see the log above".to_owned()
        } else {
            format!(
                "building Node Health Check from its module failed; see the log above. Where the \
                 Go module proxy refuses a dependency, build from a checkout of the same tag: \
                 `git clone --branch {NHC} https://{NHC_MODULE} <dir>` and run again with \
                 {NHC_SOURCE_ENV}=<dir>"
            )
        }
    })?;
    fs::copy(
        source.join("config/crd/bases").join(NHC_CRD),
        dir.join(NHC_CRD),
    )
    .with_context(|| format!("copying its CRD {NHC_CRD}"))?;
    eprintln!(
        "==> Node Health Check built in {}",
        process::minutes(started.elapsed())
    );
    Ok(dir)
}

/// The module from the proxy, unpacked in the module cache; its directory.
fn download(go: &Go) -> anyhow::Result<PathBuf> {
    let module = format!("{NHC_MODULE}@{NHC}");
    let json = process::output(
        go.command()
            .current_dir(std::env::temp_dir())
            .args(["mod", "download", "-json", &module]),
    );
    let json = match json {
        Ok(json) => json,
        Err(e) => bail!(
            "the Go module proxy refused {module}: {e:#}\n\
             Build from a checkout of the same tag instead: \
             `git clone --branch {NHC} https://{NHC_MODULE} <dir>` and run again with {NHC_SOURCE_ENV}=<dir>"
        ),
    };
    let info: serde_json::Value =
        serde_json::from_str(&json).with_context(|| format!("`go mod download` said: {json}"))?;
    match info.get("Dir").and_then(serde_json::Value::as_str) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => bail!("`go mod download -json {module}` gave no directory: {json}"),
    }
}

/// A checkout named by [`NHC_SOURCE_ENV`], checked to be the module; whether it vendors.
fn checked_checkout(dir: &Path) -> anyhow::Result<(PathBuf, bool)> {
    let go_mod = fs::read_to_string(dir.join("go.mod"))
        .with_context(|| format!("{NHC_SOURCE_ENV}={}: no go.mod there", dir.display()))?;
    if go_mod.lines().next().map(str::trim) != Some(&format!("module {NHC_MODULE}")) {
        bail!(
            "{NHC_SOURCE_ENV}={} is not a checkout of {NHC_MODULE}",
            dir.display()
        );
    }
    Ok((dir.to_path_buf(), dir.join("vendor/modules.txt").is_file()))
}
