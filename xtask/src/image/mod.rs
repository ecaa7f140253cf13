//! `cargo xtask image`: our container image built without Docker — the release binaries, the
//! links and busybox applets the Dockerfile installs ([`contents`]), and the runtime pieces of the
//! Dockerfile's distroless base from this machine ([`runtime`]) — written as an OCI image layout
//! and as a tarball for `ctr images import` / `docker load`. Also the stand-in for NVIDIA's
//! validator image the real-node tests run beside ours ([`nvidia_stand_in`]).

pub mod contents;
mod oci;
mod runtime;
mod tar;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::Context as _;
use clap::Args as ClapArgs;

use crate::{codegen, process};
use contents::{Item, Source};
use tar::Entry;

pub use gpu_operator_harness::real_node::{NVIDIA_STAND_IN, our_image as default_name};

/// Options of `cargo xtask image`.
#[derive(ClapArgs, Debug, Default)]
pub struct Args {
    /// Image reference (default: the chart's default image at the chart's appVersion).
    #[arg(long)]
    pub name: Option<String>,
    /// Directory for the OCI layout and the tarball (default: target/image).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Where an image was written.
#[derive(Debug)]
pub struct Built {
    /// Its full reference.
    pub name: String,
    /// The OCI image layout directory.
    pub layout: PathBuf,
    /// The tarball (OCI layout + Docker `manifest.json`).
    pub archive: PathBuf,
    /// `sha256:…` of its manifest.
    pub digest: String,
}

/// Builds the release binaries and our image; prints where it is and its size.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let name = args.name.clone().unwrap_or_else(default_name);
    let out = args.out.clone().unwrap_or_else(default_out);
    let built = build_ours(&name, &out)?;
    println!(
        "{}\n  digest  {}\n  layout  {}\n  archive {}",
        built.name,
        built.digest,
        built.layout.display(),
        built.archive.display()
    );
    Ok(())
}

/// `target/image` of the workspace.
pub fn default_out() -> PathBuf {
    codegen::workspace_root().join("target").join("image")
}

/// Builds the release binaries (cargo skips this when they are fresh) and writes our image.
pub fn build_ours(name: &str, out: &Path) -> anyhow::Result<Built> {
    let started = Instant::now();
    eprintln!(
        "==> image: cargo build --release ({})",
        contents::BINARIES.join(", ")
    );
    let mut cargo_build = Command::new(env!("CARGO"));
    cargo_build.args(["build", "--release", "--locked", "--bins"]);
    for package in contents::BINARIES {
        cargo_build.args(["--package", package]);
    }
    process::run(&mut cargo_build)?;
    let contents = contents::ours();
    // The Dockerfile is the other way to build this image: refuse to build one that differs.
    let dockerfile = codegen::workspace_root().join("Dockerfile");
    let text = std::fs::read_to_string(&dockerfile)
        .with_context(|| format!("reading {}", dockerfile.display()))?;
    if contents::from_dockerfile(&text)? != contents {
        anyhow::bail!(
            "the Dockerfile and `xtask image` (xtask/src/image/contents.rs) no longer put the same files, user or entrypoint into the image: change both together"
        );
    }
    let release = codegen::workspace_root().join("target").join("release");
    let mut entries = Vec::new();
    let mut executables = Vec::new();
    for item in &contents.items {
        match item {
            Item::File { path, mode, source } => {
                let from = match source {
                    Source::Cargo(binary) => release.join(binary),
                    Source::Host(path) => PathBuf::from(path),
                };
                let data = std::fs::read(&from).with_context(|| {
                    format!(
                        "reading {}{}",
                        from.display(),
                        if from.starts_with("/bin") {
                            ": install it with `apt-get install busybox-static`"
                        } else {
                            ""
                        }
                    )
                })?;
                entries.push(Entry::File {
                    path: path.trim_start_matches('/').into(),
                    mode: *mode,
                    data,
                });
                executables.push(from);
            }
            Item::Link { path, target } => entries.push(Entry::Symlink {
                path: path.trim_start_matches('/').into(),
                target: target.clone(),
            }),
        }
    }
    entries.extend(runtime::entries(&executables)?);
    let config = oci::Config {
        user: contents.user,
        entrypoint: contents.entrypoint,
        env: runtime::ENV.map(str::to_owned).to_vec(),
        working_dir: runtime::WORKING_DIR.into(),
    };
    let built = write(name, entries, &config, out)?;
    eprintln!("    image built in {}", process::minutes(started.elapsed()));
    Ok(built)
}

/// A stand-in for NVIDIA's validator image, built the same way: Debian's static busybox as
/// `/bin/busybox` with `/bin/sh` (and the `sleep`/`rm` applets NVIDIA's manifests run) linked to
/// it, and a `nvidia-validator` name — nothing else (../shared/fixtures/nvidia/README.md).
pub fn nvidia_stand_in(out: &Path) -> anyhow::Result<Built> {
    let busybox = std::fs::read("/bin/busybox")
        .context("reading /bin/busybox: install it with `apt-get install busybox-static`")?;
    let mut entries = vec![Entry::File {
        path: "bin/busybox".into(),
        mode: 0o755,
        data: busybox,
    }];
    for applet in contents::BUSYBOX_APPLETS {
        entries.push(Entry::Symlink {
            path: format!("bin/{applet}"),
            target: "busybox".into(),
        });
    }
    entries.push(Entry::Symlink {
        path: "usr/bin/nvidia-validator".into(),
        target: "/bin/busybox".into(),
    });
    let config = oci::Config {
        user: "0:0".into(),
        entrypoint: Vec::new(),
        env: vec![runtime::ENV[0].to_owned()],
        working_dir: "/".into(),
    };
    write(NVIDIA_STAND_IN, entries, &config, out)
}

/// The pod sandbox image: the `pause` binary built from the kubernetes module's `pause.c`.
pub fn pause(binary: &Path, name: &str, out: &Path) -> anyhow::Result<Built> {
    let data = std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?;
    let entries = vec![Entry::File {
        path: "pause".into(),
        mode: 0o755,
        data,
    }];
    let config = oci::Config {
        user: "65535:65535".into(),
        entrypoint: vec!["/pause".into()],
        env: vec![runtime::ENV[0].to_owned()],
        working_dir: "/".into(),
    };
    write(name, entries, &config, out)
}

fn write(
    name: &str,
    entries: Vec<Entry>,
    config: &oci::Config,
    out: &Path,
) -> anyhow::Result<Built> {
    let image = oci::image(&qualified(name), entries, config)?;
    let stem = name.rsplit('/').next().unwrap_or(name).replace(':', "-");
    std::fs::create_dir_all(out)?;
    let layout = out.join(&stem);
    let archive = out.join(format!("{stem}.tar"));
    image.write_layout(&layout)?;
    let size = image.write_archive(&archive)?;
    eprintln!(
        "    {}: layer {:.1} MB, archive {:.1} MB",
        image.name,
        mb(image.layer_size),
        mb(size)
    );
    Ok(Built {
        name: image.name,
        layout,
        archive,
        digest: image.manifest_digest,
    })
}

/// A reference as containerd names it (`x:t` is `docker.io/library/x:t`).
fn qualified(name: &str) -> String {
    let first = name.split('/').next().unwrap_or(name);
    if !name.contains('/') {
        format!("docker.io/library/{name}")
    } else if first.contains('.') || first.contains(':') || first == "localhost" {
        name.to_owned()
    } else {
        format!("docker.io/{name}")
    }
}

#[allow(clippy::cast_precision_loss)]
fn mb(bytes: usize) -> f64 {
    bytes as f64 / 1_000_000.0
}
