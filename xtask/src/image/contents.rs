//! What goes into our image, once, for both builds: the Dockerfile (for users with Docker) and
//! `cargo xtask image` (no Docker). [`ours`] is the list `xtask image` assembles; [`from_dockerfile`]
//! reads the same facts back out of the Dockerfile, and a test holds the two equal.
//!
//! The Dockerfile's base, distroless `cc-debian12:nonroot`, contributes glibc, libgcc, CA
//! certificates and the `nonroot` (65532) user; `xtask image` takes those from this machine's
//! Debian packages instead (see `super::runtime`).

use std::collections::BTreeSet;

use anyhow::{Context as _, bail};

/// Where a file of the image comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// A binary of this workspace, built with `cargo build --release`.
    Cargo(String),
    /// A file of the build machine (a Debian package's), e.g. `/bin/busybox`.
    Host(String),
}

/// One thing the image's own layer installs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    /// An executable file at `path` (absolute, in the image) with `mode`.
    File {
        path: String,
        mode: u32,
        source: Source,
    },
    /// A symlink at `path` pointing to `target` (as written, usually relative).
    Link { path: String, target: String },
}

/// Everything the Dockerfile decides about the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The base image (`FROM` of the last stage).
    pub base: String,
    /// Files and links of our layer.
    pub items: BTreeSet<Item>,
    /// `USER`, as written (`uid:gid`).
    pub user: String,
    /// `ENTRYPOINT`, exec form.
    pub entrypoint: Vec<String>,
}

/// The base image the Dockerfile builds on; `xtask image` provides its runtime pieces itself.
pub const BASE: &str = "gcr.io/distroless/cc-debian12:nonroot";
/// The image's user and group (distroless `nonroot`).
pub const USER: &str = "65532:65532";
/// The workspace binaries in the image (each its package's only binary, named as the package).
pub const BINARIES: [&str; 3] = [
    "gpu-operator",
    "gpu-operator-validator",
    "gpu-operator-cuda-workload",
];
/// The busybox applets linked into `/usr/bin`: what the rendered `sh -c` scripts run.
pub const BUSYBOX_APPLETS: [&str; 3] = ["sh", "sleep", "rm"];

/// What our image holds (see the module docs).
pub fn ours() -> Contents {
    let mut items = BTreeSet::new();
    for binary in BINARIES {
        items.insert(Item::File {
            path: format!("/usr/bin/{binary}"),
            mode: 0o755,
            source: Source::Cargo(binary.to_owned()),
        });
    }
    // NVIDIA's command names, which operand manifests, the validator's workload pods and users'
    // scripts call.
    items.insert(Item::Link {
        path: "/usr/bin/nvidia-validator".into(),
        target: "gpu-operator-validator".into(),
    });
    items.insert(Item::Link {
        path: "/usr/bin/vectorAdd".into(),
        target: "gpu-operator-cuda-workload".into(),
    });
    items.insert(Item::File {
        path: "/usr/bin/busybox".into(),
        mode: 0o755,
        source: Source::Host("/bin/busybox".into()),
    });
    for applet in BUSYBOX_APPLETS {
        items.insert(Item::Link {
            path: format!("/usr/bin/{applet}"),
            target: "busybox".into(),
        });
    }
    Contents {
        base: BASE.into(),
        items,
        user: USER.into(),
        entrypoint: vec!["/usr/bin/gpu-operator".into()],
    }
}

/// Reads [`Contents`] out of a Dockerfile of our shape: `install -D --mode M SRC /out/PATH`,
/// `ln -s TARGET /out/PATH` (also inside a `for x in …; do …; done` loop), `USER`, `ENTRYPOINT`.
pub fn from_dockerfile(text: &str) -> anyhow::Result<Contents> {
    let joined = text.replace("\\\n", " ");
    let mut base = None;
    let mut items = BTreeSet::new();
    let mut user = None;
    let mut entrypoint = None;
    for line in joined.lines().map(str::trim) {
        let (instruction, rest) = line.split_once(' ').unwrap_or((line, ""));
        match instruction {
            "FROM" => base = rest.split_whitespace().next().map(str::to_owned),
            "USER" => user = Some(rest.trim().to_owned()),
            "ENTRYPOINT" => {
                entrypoint = Some(
                    serde_json::from_str(rest.trim())
                        .context("ENTRYPOINT must be in exec form (a JSON list)")?,
                );
            }
            "RUN" => {
                for command in rest.split("&&") {
                    for words in expand_loop(command.trim())? {
                        items.extend(item_of(&words)?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Contents {
        base: base.context("the Dockerfile has no FROM")?,
        items,
        user: user.context("the Dockerfile sets no USER")?,
        entrypoint: entrypoint.context("the Dockerfile has no ENTRYPOINT")?,
    })
}

/// `for x in a b; do cmd "$x"; done` as one word list per item; any other command as itself.
fn expand_loop(command: &str) -> anyhow::Result<Vec<Vec<String>>> {
    let words = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .map(|w| w.trim_matches('"').to_owned())
            .collect()
    };
    let Some(rest) = command.strip_prefix("for ") else {
        return Ok(vec![words(command)]);
    };
    let parts: Vec<&str> = rest.split(';').map(str::trim).collect();
    let (Some(head), Some(body)) = (parts.first(), parts.get(1)) else {
        bail!("cannot read the loop `{command}`");
    };
    let (variable, list) = head
        .split_once(" in ")
        .with_context(|| format!("cannot read the loop `{command}`"))?;
    let body = body.strip_prefix("do ").unwrap_or(body);
    Ok(list
        .split_whitespace()
        .map(|value| words(&body.replace(&format!("${variable}"), value)))
        .collect())
}

/// The item an `install` or `ln` command adds to `/out`, if any.
fn item_of(words: &[String]) -> anyhow::Result<Option<Item>> {
    let in_image = |path: &str| path.strip_prefix("/out").map(str::to_owned);
    match words.first().map(String::as_str) {
        Some("install") => {
            let mode = words
                .iter()
                .position(|w| w == "--mode" || w == "-m")
                .and_then(|i| words.get(i + 1))
                .context("`install` without --mode")?;
            let mode = u32::from_str_radix(mode, 8).context("install --mode is not octal")?;
            let [.., source, target] = words else {
                bail!("cannot read `{}`", words.join(" "));
            };
            let Some(path) = in_image(target) else {
                return Ok(None);
            };
            let source = match source.strip_prefix("target/release/") {
                Some(binary) => Source::Cargo(binary.to_owned()),
                None => Source::Host(source.clone()),
            };
            Ok(Some(Item::File { path, mode, source }))
        }
        Some("ln") => {
            let [.., target, link] = words else {
                bail!("cannot read `{}`", words.join(" "));
            };
            Ok(in_image(link).map(|path| Item::Link {
                path,
                target: target.clone(),
            }))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn dockerfile() -> String {
        std::fs::read_to_string(crate::codegen::workspace_root().join("Dockerfile")).unwrap()
    }

    /// `cargo xtask image` and `docker build` put the same binaries, links, user and entrypoint
    /// into the image, on the base whose runtime pieces `xtask image` provides.
    #[test]
    fn dockerfile_and_xtask_image_agree() {
        let from_docker = from_dockerfile(&dockerfile()).unwrap();
        assert_eq!(from_docker, ours());
    }

    /// The reader sees a change to the Dockerfile (the agreement test is not vacuous).
    #[test]
    fn the_reader_notices_each_kind_of_change() {
        let original = dockerfile();
        let changes = [
            ("for applet in sh sleep rm;", "for applet in sh sleep;"),
            ("ln -s gpu-operator-validator", "ln -s gpu-operator"),
            ("USER 65532:65532", "USER 0:0"),
            (
                "ENTRYPOINT [\"/usr/bin/gpu-operator\"]",
                "ENTRYPOINT [\"/usr/bin/gpu-operator-validator\"]",
            ),
            ("--mode 0755 /bin/busybox", "--mode 0700 /bin/busybox"),
            ("cc-debian12:nonroot", "static-debian12:nonroot"),
        ];
        for (from, to) in changes {
            assert!(
                original.contains(from),
                "the Dockerfile no longer has {from:?}"
            );
            let edited = from_dockerfile(&original.replace(from, to)).unwrap();
            assert_ne!(edited, ours(), "changing {from:?} to {to:?} went unnoticed");
        }
    }

    #[test]
    fn a_shell_entrypoint_is_refused_with_the_fix() {
        let error =
            from_dockerfile("FROM x\nUSER 1\nENTRYPOINT /usr/bin/gpu-operator\n").unwrap_err();
        assert!(error.to_string().contains("exec form"), "{error}");
    }
}
