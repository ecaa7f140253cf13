//! The runtime pieces the Dockerfile's distroless base provides, taken from this machine's Debian
//! packages for `xtask image`: the shared libraries the binaries load (as `ldd` names them),
//! CA certificates, and the `nonroot` user (65532) with its home directory.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use super::tar::Entry;

/// The CA bundle of Debian's `ca-certificates`, at the path distroless has it too.
pub const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// `/etc/passwd` of distroless `nonroot` images.
const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
/// `/etc/group` of distroless `nonroot` images.
const GROUP: &str = "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n";

/// The environment distroless sets.
pub const ENV: [&str; 2] = [
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
];
/// The working directory of distroless `nonroot` images.
pub const WORKING_DIR: &str = "/home/nonroot";

/// The base's entries: libraries of `binaries`, CA bundle, passwd/group, `/tmp`, the home.
pub fn entries(binaries: &[PathBuf]) -> anyhow::Result<Vec<Entry>> {
    let mut entries = vec![
        Entry::Dir {
            path: "tmp".into(),
            mode: 0o1777,
            owner: 0,
        },
        Entry::Dir {
            path: WORKING_DIR.trim_start_matches('/').into(),
            mode: 0o700,
            owner: 65532,
        },
        file("etc/passwd", 0o644, PASSWD.as_bytes().to_vec()),
        file("etc/group", 0o644, GROUP.as_bytes().to_vec()),
    ];
    let bundle = std::fs::read(CA_BUNDLE).with_context(|| {
        format!("reading {CA_BUNDLE}: install Debian's CA certificates with `apt-get install ca-certificates`")
    })?;
    entries.push(file(CA_BUNDLE.trim_start_matches('/'), 0o644, bundle));
    let mut libraries = BTreeSet::new();
    for binary in binaries {
        libraries.extend(shared_libraries(binary)?);
    }
    for library in libraries {
        let data =
            std::fs::read(&library).with_context(|| format!("reading {}", library.display()))?;
        let path = library.display().to_string();
        entries.push(file(path.trim_start_matches('/'), 0o755, data));
    }
    Ok(entries)
}

fn file(path: &str, mode: u32, data: Vec<u8>) -> Entry {
    Entry::File {
        path: path.into(),
        mode,
        data,
    }
}

/// The libraries `binary` loads, at the paths the dynamic loader looks them up (empty when it is
/// linked statically).
pub fn shared_libraries(binary: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let output = Command::new("ldd")
        .arg(binary)
        .output()
        .context("running `ldd` (Debian's libc-bin) to find the binaries' libraries")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        // ldd exits 1 with "not a dynamic executable" for static binaries.
        if String::from_utf8_lossy(&output.stderr).contains("not a dynamic executable")
            || text.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        bail!(
            "`ldd {}` failed: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    parse_ldd(&text).with_context(|| format!("reading `ldd {}`", binary.display()))
}

/// Paths out of `ldd` output: `name => /path (addr)` and the loader's `/path (addr)`.
fn parse_ldd(text: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.contains("statically linked") || line.starts_with("linux-vdso") {
            continue;
        }
        if line.contains("=> not found") {
            bail!("a library is missing on this machine: {line}");
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            out.push(PathBuf::from(path));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// Real `ldd` output of our debug binary (copied from this machine), read as the loader would.
    #[test]
    fn reads_libraries_and_the_loader_from_ldd_output() {
        let text = "\tlinux-vdso.so.1 (0x00007f07e6d26000)\n\
            \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f07e6cf5000)\n\
            \tlibm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x00007f07e4120000)\n\
            \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f07e3f3e000)\n\
            \t/lib64/ld-linux-x86-64.so.2 (0x00007f07e6d28000)\n";
        let paths = parse_ldd(text).unwrap();
        let paths: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libm.so.6",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2",
            ]
        );
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it() {
        let error = parse_ldd("\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(error.to_string().contains("libfoo.so.1"), "{error}");
    }

    /// A static binary (Debian's busybox-static) needs no library; a dynamic one (ls) does.
    #[test]
    fn static_busybox_needs_nothing_and_ls_needs_libc() {
        assert_eq!(
            shared_libraries(Path::new("/bin/busybox")).unwrap(),
            Vec::<PathBuf>::new()
        );
        let ls = shared_libraries(Path::new("/bin/ls")).unwrap();
        assert!(ls.iter().any(|p| p.ends_with("libc.so.6")), "{ls:?}");
    }
}
