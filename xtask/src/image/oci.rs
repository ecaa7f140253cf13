//! An image as files: one uncompressed layer, its config and manifest, written both as an OCI
//! image layout directory and as one tarball that `ctr images import`, `docker load` and
//! `podman load` all read (the OCI layout plus Docker's `manifest.json`, as `docker save` writes).

use std::{collections::BTreeMap, fmt::Write as _, fs, path::Path};

use anyhow::Context as _;
use serde_json::json;

use super::tar::{self, Entry};

/// What an image's config says besides its layer.
#[derive(Debug, Clone)]
pub struct Config {
    /// `uid:gid`.
    pub user: String,
    /// Exec-form entrypoint (empty for none).
    pub entrypoint: Vec<String>,
    /// `NAME=value` environment.
    pub env: Vec<String>,
    /// Working directory.
    pub working_dir: String,
}

/// A built image: its blobs, by digest, and what names them.
#[derive(Debug)]
pub struct Image {
    /// Full reference, e.g. `docker.io/library/gpu-operator:dev`.
    pub name: String,
    /// `sha256:…` of the manifest (what containerd reports as the image's digest).
    pub manifest_digest: String,
    /// Uncompressed size of the layer in bytes.
    pub layer_size: usize,
    blobs: BTreeMap<String, Vec<u8>>,
    index: Vec<u8>,
    docker_manifest: Vec<u8>,
}

/// Assembles an image from the layer's entries (parent directories are added) and its config.
pub fn image(name: &str, entries: Vec<Entry>, config: &Config) -> anyhow::Result<Image> {
    let layer = tar::write(&with_parents(entries))?;
    let layer_digest = sha256(&layer);
    let config_json = serde_json::to_vec(&json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Env": config.env,
            "WorkingDir": config.working_dir,
        },
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
        "history": [{ "created": "1970-01-01T00:00:00Z", "created_by": "cargo xtask image" }],
    }))?;
    let config_digest = sha256(&config_json);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": config_digest,
            "size": config_json.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": layer_digest,
            "size": layer.len(),
        }],
    }))?;
    let manifest_digest = sha256(&manifest);
    let tag = name.rsplit_once(':').map_or("latest", |(_, tag)| tag);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest.len(),
            "annotations": {
                "io.containerd.image.name": name,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    }))?;
    let docker_manifest = serde_json::to_vec(&json!([{
        "Config": blob_path(&config_digest),
        "RepoTags": [short_name(name)],
        "Layers": [blob_path(&layer_digest)],
    }]))?;
    let layer_size = layer.len();
    let blobs = BTreeMap::from([
        (layer_digest, layer),
        (config_digest, config_json),
        (manifest_digest.clone(), manifest),
    ]);
    Ok(Image {
        name: name.to_owned(),
        manifest_digest,
        layer_size,
        blobs,
        index,
        docker_manifest,
    })
}

impl Image {
    fn files(&self) -> Vec<(String, &[u8])> {
        let mut files: Vec<(String, &[u8])> = vec![
            ("oci-layout".into(), br#"{"imageLayoutVersion":"1.0.0"}"#),
            ("index.json".into(), &self.index),
            ("manifest.json".into(), &self.docker_manifest),
        ];
        for (digest, data) in &self.blobs {
            files.push((blob_path(digest), data));
        }
        files
    }

    /// Writes the OCI image layout into `dir` (replacing what was there).
    pub fn write_layout(&self, dir: &Path) -> anyhow::Result<()> {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        for (path, data) in self.files() {
            let path = dir.join(path);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&path, data).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// Writes the same files as one tarball; returns its size in bytes.
    pub fn write_archive(&self, path: &Path) -> anyhow::Result<usize> {
        let entries: Vec<Entry> = self
            .files()
            .into_iter()
            .map(|(path, data)| Entry::File {
                path,
                mode: 0o644,
                data: data.to_vec(),
            })
            .collect();
        let archive = tar::write(&with_parents(entries))?;
        fs::write(path, &archive).with_context(|| format!("writing {}", path.display()))?;
        Ok(archive.len())
    }
}

/// `docker.io/library/x:t` as Docker writes it in `RepoTags` (`x:t`).
fn short_name(name: &str) -> &str {
    name.strip_prefix("docker.io/library/").unwrap_or(name)
}

fn blob_path(digest: &str) -> String {
    format!("blobs/{}", digest.replacen(':', "/", 1))
}

/// `sha256:<hex>` of `data`.
pub fn sha256(data: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    let mut text = String::from("sha256:");
    for byte in digest.as_ref() {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The entries sorted by path with every missing parent directory added (mode 0755, root).
fn with_parents(entries: Vec<Entry>) -> Vec<Entry> {
    let mut by_path: BTreeMap<String, Entry> = BTreeMap::new();
    for entry in entries {
        let path = entry.path().to_owned();
        for ancestor in Path::new(&path).ancestors().skip(1) {
            let dir = ancestor.display().to_string();
            if dir.is_empty() {
                break;
            }
            by_path.entry(dir.clone()).or_insert(Entry::Dir {
                path: dir,
                mode: 0o755,
                owner: 0,
            });
        }
        by_path.insert(path, entry);
    }
    by_path.into_values().collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The digest the OCI layout uses is SHA-256 of the bytes (FIPS 180-2 test vector "abc").
    #[test]
    fn sha256_matches_the_standard_test_vector() {
        assert_eq!(
            sha256(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn parents_come_first_and_explicit_directories_keep_their_mode() {
        let entries = with_parents(vec![
            Entry::File {
                path: "usr/bin/x".into(),
                mode: 0o755,
                data: vec![],
            },
            Entry::Dir {
                path: "tmp".into(),
                mode: 0o1777,
                owner: 0,
            },
        ]);
        let paths: Vec<&str> = entries.iter().map(Entry::path).collect();
        assert_eq!(paths, ["tmp", "usr", "usr/bin", "usr/bin/x"]);
        assert!(matches!(entries[0], Entry::Dir { mode: 0o1777, .. }));
    }
}
