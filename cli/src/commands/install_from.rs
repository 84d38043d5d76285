//! `install --from ARCHIVE [--sha256 HEX | --checksums SHA256SUMS]`: a release
//! archive (path or URL) becomes the active release, through
//! [`lapis_installer::install_archive`] (fetch → checksum → extract → the
//! same verify → smoke-test → activate sequence as a plain `install`). This
//! handler only turns the flags into a request and prints the result.

use std::io::IsTerminal;
use std::time::Instant;

use lapis_installer::Expected;

use super::install::{ServiceStep, finish, install_options};
use super::paths::{installer_error, resolve};
use crate::args::{GlobalArgs, InstallArgs};
use crate::exit::CliResult;
use crate::identity::build_identity;

pub(super) fn run(global: &GlobalArgs, args: InstallArgs, from: &str) -> CliResult {
    let started = Instant::now();
    let paths = resolve(global, args.home.dir(), args.install_path.as_deref())?;
    let expected = match (&args.sha256, &args.checksums) {
        (Some(hex), _) => Some(Expected::Sha256(hex.clone())),
        (None, Some(list)) => Some(Expected::Checksums(list.clone())),
        (None, None) => None,
    };
    let progress = !args.out.json && std::io::stderr().is_terminal();
    let archive = lapis_installer::install_archive(
        &paths,
        from,
        expected.as_ref(),
        &build_identity().target,
        progress,
        &install_options(args.force, true),
    )
    .map_err(installer_error)?;
    if !args.out.json {
        crate::output::line(format!(
            "verified {} sha256 {}",
            archive.name, archive.sha256
        ))?;
    }
    finish(&paths, &archive.install, &ServiceStep::of(&args), started)
}
