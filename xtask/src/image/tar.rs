//! A deterministic ustar writer for image layers and archives: regular files, directories and
//! symlinks, files owned by root, all dated at the epoch, so the same inputs give the same digest.

use anyhow::bail;

/// One entry of a tar archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (path without a trailing slash) with its mode and owner (uid = gid).
    Dir { path: String, mode: u32, owner: u32 },
    /// A regular file with its mode and contents.
    File {
        path: String,
        mode: u32,
        data: Vec<u8>,
    },
    /// A symbolic link to `target`.
    Symlink { path: String, target: String },
}

impl Entry {
    /// The path of the entry inside the archive (no leading slash).
    pub fn path(&self) -> &str {
        match self {
            Self::Dir { path, .. } | Self::File { path, .. } | Self::Symlink { path, .. } => path,
        }
    }
}

/// Writes `entries` in order as a ustar archive (two zero blocks at the end).
pub fn write(entries: &[Entry]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    for entry in entries {
        let (path, mode, owner, size, kind, link) = match entry {
            Entry::Dir { path, mode, owner } => (format!("{path}/"), *mode, *owner, 0, b'5', ""),
            Entry::File { path, mode, data } => (path.clone(), *mode, 0, data.len(), b'0', ""),
            Entry::Symlink { path, target } => (path.clone(), 0o777, 0, 0, b'2', target.as_str()),
        };
        out.extend_from_slice(&header(&path, mode, owner, size, kind, link)?);
        if let Entry::File { data, .. } = entry {
            out.extend_from_slice(data);
            out.resize(out.len().next_multiple_of(512), 0);
        }
    }
    out.resize(out.len() + 1024, 0);
    Ok(out)
}

fn header(
    path: &str,
    mode: u32,
    owner: u32,
    size: usize,
    kind: u8,
    link: &str,
) -> anyhow::Result<[u8; 512]> {
    let mut block = [0u8; 512];
    let (prefix, name) = split_path(path)?;
    if link.len() > 100 {
        bail!("symlink target {link:?} is longer than ustar's 100 bytes");
    }
    block[..name.len()].copy_from_slice(name.as_bytes());
    octal(&mut block[100..108], u64::from(mode));
    octal(&mut block[108..116], u64::from(owner)); // uid
    octal(&mut block[116..124], u64::from(owner)); // gid
    octal(&mut block[124..136], size as u64);
    octal(&mut block[136..148], 0); // mtime: the epoch
    block[156] = kind;
    block[157..157 + link.len()].copy_from_slice(link.as_bytes());
    block[257..263].copy_from_slice(b"ustar\0");
    block[263..265].copy_from_slice(b"00");
    block[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    block[148..156].fill(b' ');
    let sum: u32 = block.iter().map(|&b| u32::from(b)).sum();
    octal(&mut block[148..155], u64::from(sum));
    Ok(block)
}

/// Splits a path into ustar's prefix (≤ 155 bytes) and name (≤ 100 bytes) fields.
fn split_path(path: &str) -> anyhow::Result<(&str, &str)> {
    if path.len() <= 100 {
        return Ok(("", path));
    }
    for (index, _) in path.match_indices('/') {
        let (prefix, name) = (&path[..index], &path[index + 1..]);
        if prefix.len() <= 155 && name.len() <= 100 && !name.is_empty() {
            return Ok((prefix, name));
        }
    }
    bail!("path {path:?} does not fit a ustar header")
}

/// Writes `value` as zero-padded octal followed by a NUL into `field`.
fn octal(field: &mut [u8], value: u64) {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    field[..digits].copy_from_slice(&text.as_bytes()[text.len() - digits..]);
    field[digits] = 0;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::process::Command;

    use super::*;

    /// GNU tar (an outside reader) lists what we wrote, with modes, owners and link targets.
    #[test]
    fn gnu_tar_reads_the_archive_back() {
        let long = format!("usr/{}/file", "d".repeat(120));
        let entries = vec![
            Entry::Dir {
                path: "usr".into(),
                mode: 0o755,
                owner: 65532,
            },
            Entry::File {
                path: "usr/bin/tool".into(),
                mode: 0o755,
                data: b"#!/bin/sh\necho hi\n".to_vec(),
            },
            Entry::Symlink {
                path: "usr/bin/alias".into(),
                target: "tool".into(),
            },
            Entry::File {
                path: long.clone(),
                mode: 0o644,
                data: vec![7; 1000],
            },
        ];
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.tar");
        std::fs::write(&archive, write(&entries).unwrap()).unwrap();
        let listing = Command::new("tar")
            .args(["--numeric-owner", "-tvf"])
            .arg(&archive)
            .output()
            .unwrap();
        assert!(listing.status.success(), "{listing:?}");
        let listing = String::from_utf8(listing.stdout).unwrap();
        let lines: Vec<Vec<&str>> = listing
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines.len(), 4, "{listing}");
        assert_eq!(lines[0][..2], ["drwxr-xr-x", "65532/65532"]);
        assert_eq!(lines[1][..3], ["-rwxr-xr-x", "0/0", "18"]);
        assert_eq!(lines[2][0], "lrwxrwxrwx");
        assert_eq!(lines[2][5..], ["usr/bin/alias", "->", "tool"]);
        assert_eq!(lines[3][..3], ["-rw-r--r--", "0/0", "1000"]);
        assert_eq!(lines[3][5], long);
        let out = dir.path().join("x");
        std::fs::create_dir(&out).unwrap();
        let extract = Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&out)
            .status()
            .unwrap();
        assert!(extract.success());
        assert_eq!(std::fs::read(out.join(&long)).unwrap(), vec![7; 1000]);
    }

    #[test]
    fn refuses_a_path_that_does_not_fit() {
        let path = "x".repeat(300);
        let error = write(&[Entry::Dir {
            path,
            mode: 0o755,
            owner: 0,
        }])
        .unwrap_err();
        assert!(error.to_string().contains("does not fit"), "{error}");
    }
}
