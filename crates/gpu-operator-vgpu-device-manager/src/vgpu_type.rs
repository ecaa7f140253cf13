//! vGPU type names, by the grammar NVIDIA's vGPU device manager parses them with: time-sliced
//! `<GPU>-<framebuffer GB><series>` (`A10-24Q`, `L40S-48Q`, `RTX6000-Ada-24Q`; `0` GB is 512 MB,
//! as in `M60-0Q`) and MIG-backed `<GPU>-<slices>-<framebuffer GB><series>[<attribute>]`
//! (`A100-1-5C`, `A30-1-6CME`, `DC-1-24CGFX`), the series being A, B, C or Q and the attribute
//! ME, NOME, MEALL or GFX. Pure.

/// What a vGPU type name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VgpuType<'a> {
    /// The GPU model part (`A100`, `RTX6000-Ada`).
    pub gpu: &'a str,
    /// The GPU slices of a MIG-backed type; `None` for a time-sliced one.
    pub slices: Option<u8>,
}

impl VgpuType<'_> {
    /// Whether the type is MIG-backed (one GPU holds either kind, never both).
    pub fn mig_backed(&self) -> bool {
        self.slices.is_some()
    }
}

/// The series letters.
const SERIES: [char; 4] = ['A', 'B', 'C', 'Q'];
/// The attributes a MIG-backed type may end with.
const ATTRIBUTES: [&str; 4] = ["MEALL", "NOME", "ME", "GFX"];

/// What a good name looks like, for messages.
pub const SHAPE: &str = "a vGPU type is <GPU>-<framebuffer GB><series> (time-sliced, such as \
                         A10-24Q or L40S-48Q) or <GPU>-<slices>-<framebuffer GB><series> \
                         (MIG-backed, such as A100-1-5C or A30-1-6CME), the series being A, B, \
                         C or Q";

/// `name` read as a vGPU type, or `None` when it cannot be one.
pub fn parse(name: &str) -> Option<VgpuType<'_>> {
    time_sliced(name).or_else(|| mig_backed(name))
}

/// `[A-Z0-9]+(-[a-zA-Z]+)*-<GB><series>`.
fn time_sliced(name: &str) -> Option<VgpuType<'_>> {
    let (gpu, size) = name.strip_suffix(SERIES)?.rsplit_once('-')?;
    let mut parts = gpu.split('-');
    let model_ok = parts.next().is_some_and(model_word);
    (model_ok && parts.all(suffix_word) && gigabytes(size))
        .then_some(VgpuType { gpu, slices: None })
}

/// `[A-Z0-9]+-[1-9]-<GB><series>(ME|NOME|MEALL|GFX)?`.
fn mig_backed(name: &str) -> Option<VgpuType<'_>> {
    let cores = ATTRIBUTES
        .iter()
        .filter_map(|attribute| name.strip_suffix(attribute))
        .chain([name]);
    for core in cores {
        let Some(body) = core.strip_suffix(SERIES) else {
            continue;
        };
        let mut parts = body.splitn(3, '-');
        let (Some(gpu), Some(slices), Some(size)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let slices = match slices.as_bytes() {
            [digit @ b'1'..=b'9'] => digit - b'0',
            _ => continue,
        };
        if model_word(gpu) && gigabytes(size) {
            return Some(VgpuType {
                gpu,
                slices: Some(slices),
            });
        }
    }
    None
}

/// `[A-Z0-9]+`.
fn model_word(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// `[a-zA-Z]+`.
fn suffix_word(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_ascii_alphabetic())
}

/// `0|[1-9][0-9]*`.
fn gigabytes(size: &str) -> bool {
    size == "0"
        || (size.chars().all(|c| c.is_ascii_digit())
            && size.chars().next().is_some_and(|c| c != '0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidias_names_parse_with_their_gpu_and_kind() {
        for (name, gpu, slices) in [
            ("A10-24Q", "A10", None),
            ("L40S-48Q", "L40S", None),
            ("M60-0Q", "M60", None),
            ("RTX6000-Ada-24Q", "RTX6000-Ada", None),
            ("A100-1-5C", "A100", Some(1)),
            ("A30-1-6CME", "A30", Some(1)),
            ("A100-1-5CNOME", "A100", Some(1)),
            ("B300X-7-269C", "B300X", Some(7)),
            ("DC-1-24CGFX", "DC", Some(1)),
            ("6000D-2-84QGFX", "6000D", Some(2)),
        ] {
            assert_eq!(parse(name), Some(VgpuType { gpu, slices }), "{name}");
        }
    }

    #[test]
    fn what_cannot_be_a_vgpu_type_is_refused() {
        for name in [
            "",
            "A100",
            "A100-4",
            "A100-4X",
            "a100-4C",
            "A100_4C",
            "A100-04C",
            "A100-0-5C",
            "A100-10-5C",
            "A100-1-5CXX",
            "A10-24QGFX",
            "RTX6000-Ada-1-24Q",
            "-24Q",
            "A100--4C",
        ] {
            assert_eq!(parse(name), None, "{name}");
        }
    }
}
