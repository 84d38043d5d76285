//! The oldest glibc a Linux gnu binary runs on, read from the binary itself.
//!
//! A dynamically linked ELF executable lists, in its `.gnu.version_r`
//! section (`SHT_GNU_verneed`), every symbol version it needs from each
//! shared library; the dynamic loader refuses to start it when the system's
//! glibc lacks one of them. The highest `GLIBC_x.y[.z]` there is therefore
//! the binary's real glibc requirement, whatever machine built it.
//! `scripts/release build` runs [`check_floor`] on every `*-linux-gnu`
//! binary so a release never needs a newer glibc than [`GLIBC_FLOOR`], the
//! floor the README documents and `install.sh` falls back to musl below.
//!
//! Only 64-bit little-endian ELF is read (every gnu target released); any
//! other input is an error, never a pass.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// The documented floor: the gnu archives run on glibc 2.35 and newer
/// (Ubuntu 22.04, Debian 12, Fedora 36, RHEL 10). Keep in step with
/// `GLIBC_FLOOR` in `install.sh` and the README.
pub const GLIBC_FLOOR: GlibcVersion = GlibcVersion(2, 35, 0);

/// A glibc symbol version, `GLIBC_2.2.5` = `GlibcVersion(2, 2, 5)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlibcVersion(pub u32, pub u32, pub u32);

impl fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.0, self.1)?;
        if self.2 != 0 {
            write!(f, ".{}", self.2)?;
        }
        Ok(())
    }
}

impl FromStr for GlibcVersion {
    type Err = GlibcError;

    /// `2.35` or `2.2.5`.
    fn from_str(text: &str) -> Result<GlibcVersion, GlibcError> {
        let bad = || GlibcError::BadVersion(text.to_owned());
        let parts: Vec<u32> = text
            .split('.')
            .map(|p| p.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match parts[..] {
            [major, minor] => Ok(GlibcVersion(major, minor, 0)),
            [major, minor, patch] => Ok(GlibcVersion(major, minor, patch)),
            _ => Err(bad()),
        }
    }
}

/// Why a binary's glibc requirement could not be read or is too new.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GlibcError {
    /// Not a 64-bit little-endian ELF file, or a truncated one.
    #[error("not a readable 64-bit little-endian ELF file: {0}")]
    NotElf(&'static str),
    /// A version string that is not `x.y` or `x.y.z`.
    #[error("{0:?} is not a glibc version (x.y or x.y.z)")]
    BadVersion(String),
    /// The binary needs a glibc newer than the floor.
    #[error("the binary needs GLIBC_{needed}, newer than the floor GLIBC_{floor}")]
    TooNew {
        /// The highest version the binary needs.
        needed: GlibcVersion,
        /// The floor it was checked against.
        floor: GlibcVersion,
    },
}

const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;

/// The highest `GLIBC_*` version `elf` needs, or `None` when it needs no
/// versioned glibc symbol (a static binary).
pub fn required_glibc(elf: &[u8]) -> Result<Option<GlibcVersion>, GlibcError> {
    if elf.get(..4) != Some(b"\x7fELF") {
        return Err(GlibcError::NotElf("no ELF magic"));
    }
    if elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err(GlibcError::NotElf("not ELFCLASS64 / ELFDATA2LSB"));
    }
    let shoff = u64_at(elf, 0x28)? as usize;
    let shentsize = u16_at(elf, 0x3a)? as usize;
    let shnum = u16_at(elf, 0x3c)? as usize;
    if shentsize < 64 {
        return Err(GlibcError::NotElf("section header entries too small"));
    }
    let section = |index: usize| -> Result<(u32, usize, usize, u32, u32), GlibcError> {
        let base = index
            .checked_mul(shentsize)
            .and_then(|o| o.checked_add(shoff))
            .ok_or(GlibcError::NotElf("section header offset overflows"))?;
        Ok((
            u32_at(elf, base + 4)?,
            u64_at(elf, base + 24)? as usize,
            u64_at(elf, base + 32)? as usize,
            u32_at(elf, base + 40)?,
            u32_at(elf, base + 44)?,
        ))
    };
    let mut highest: Option<GlibcVersion> = None;
    for index in 0..shnum {
        let (kind, offset, size, link, count) = section(index)?;
        if kind != SHT_GNU_VERNEED {
            continue;
        }
        let (_, strings, strings_size, _, _) = section(link as usize)?;
        let strings = elf
            .get(strings..strings.saturating_add(strings_size))
            .ok_or(GlibcError::NotElf("string table out of bounds"))?;
        let end = offset.saturating_add(size);
        let mut need = offset;
        for _ in 0..count {
            let aux_count = u16_at(elf, need + 2)?;
            let mut aux = need + u32_at(elf, need + 8)? as usize;
            for _ in 0..aux_count {
                if aux >= end {
                    return Err(GlibcError::NotElf("version entry out of bounds"));
                }
                let name = c_str(strings, u32_at(elf, aux + 8)? as usize)?;
                if let Some(version) = name
                    .strip_prefix("GLIBC_")
                    .and_then(|v| v.parse::<GlibcVersion>().ok())
                {
                    highest = highest.max(Some(version));
                }
                aux += u32_at(elf, aux + 12)? as usize;
            }
            need += u32_at(elf, need + 12)? as usize;
        }
    }
    Ok(highest)
}

/// Fails when `elf` needs a glibc newer than `floor`; returns what it needs.
pub fn check_floor(elf: &[u8], floor: GlibcVersion) -> Result<Option<GlibcVersion>, GlibcError> {
    match required_glibc(elf)? {
        Some(needed) if needed > floor => Err(GlibcError::TooNew { needed, floor }),
        other => Ok(other),
    }
}

fn bytes_at<const N: usize>(elf: &[u8], at: usize) -> Result<[u8; N], GlibcError> {
    elf.get(at..at.saturating_add(N))
        .and_then(|b| b.try_into().ok())
        .ok_or(GlibcError::NotElf("truncated"))
}

fn u16_at(elf: &[u8], at: usize) -> Result<u16, GlibcError> {
    bytes_at(elf, at).map(u16::from_le_bytes)
}

fn u32_at(elf: &[u8], at: usize) -> Result<u32, GlibcError> {
    bytes_at(elf, at).map(u32::from_le_bytes)
}

fn u64_at(elf: &[u8], at: usize) -> Result<u64, GlibcError> {
    bytes_at(elf, at).map(u64::from_le_bytes)
}

fn c_str(table: &[u8], at: usize) -> Result<&str, GlibcError> {
    let rest = table
        .get(at..)
        .ok_or(GlibcError::NotElf("string offset out of bounds"))?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or(GlibcError::NotElf("unterminated string"))?;
    std::str::from_utf8(&rest[..end]).map_err(|_| GlibcError::NotElf("string is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!("2.35".parse(), Ok(GlibcVersion(2, 35, 0)));
        assert_eq!("2.2.5".parse(), Ok(GlibcVersion(2, 2, 5)));
        assert!(GlibcVersion(2, 2, 5) < GlibcVersion(2, 3, 0));
        assert!(GlibcVersion(2, 9, 0) < GlibcVersion(2, 10, 0));
        assert_eq!(GlibcVersion(2, 2, 5).to_string(), "2.2.5");
        assert_eq!(GLIBC_FLOOR.to_string(), "2.35");
        for bad in ["", "2", "2.x", "2.3.4.5", "PRIVATE"] {
            assert!(bad.parse::<GlibcVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn non_elf_input_is_an_error_not_a_pass() {
        assert!(matches!(
            check_floor(b"#!/bin/sh\n", GLIBC_FLOOR),
            Err(GlibcError::NotElf(_))
        ));
        let mut truncated = b"\x7fELF\x02\x01\x01".to_vec();
        truncated.resize(40, 0);
        assert!(matches!(
            required_glibc(&truncated),
            Err(GlibcError::NotElf(_))
        ));
    }

    /// This test executable is a gnu-linked ELF when the tests run on a glibc
    /// Linux, so it has real version needs to read (`objdump -T` agrees).
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    #[test]
    fn the_check_reads_a_real_binary_and_can_fail() {
        let elf = std::fs::read("/proc/self/exe").unwrap();
        let needed = required_glibc(&elf)
            .unwrap()
            .expect("a gnu test binary needs versioned glibc symbols");
        assert!(needed >= GlibcVersion(2, 2, 5), "{needed}");
        // binutils, when present, must see the same highest version.
        if let Ok(out) = std::process::Command::new("objdump")
            .args(["-T", "/proc/self/exe"])
            .output()
            && out.status.success()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            let highest = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .filter_map(|w| w.strip_prefix("GLIBC_")?.parse::<GlibcVersion>().ok())
                .max();
            assert_eq!(highest, Some(needed), "objdump -T disagrees");
        }
        assert_eq!(check_floor(&elf, needed), Ok(Some(needed)));
        assert_eq!(
            check_floor(&elf, GlibcVersion(2, 0, 0)),
            Err(GlibcError::TooNew {
                needed,
                floor: GlibcVersion(2, 0, 0)
            })
        );
    }
}
