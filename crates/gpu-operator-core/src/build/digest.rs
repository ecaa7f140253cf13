//! Digests that rendered objects carry (pod-template annotations, env), so a change of what they
//! summarise rolls the pods: stable across Rust versions and platforms, unlike `DefaultHasher`,
//! so an operator upgrade alone never restarts anything.

/// The 64-bit FNV-1a digest of `bytes`, as 16 hex digits.
pub fn of(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values_do_not_change() {
        assert_eq!(super::of(b""), "cbf29ce484222325");
        assert_eq!(super::of(b"a"), "af63dc4c8601ec8c");
    }
}
