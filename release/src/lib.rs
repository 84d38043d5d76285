//! `lapis-release`: what a release *is*, independent of how it is installed.
//!
//! A release is a tree (`bin/lapis-ai-controller` plus the licence files
//! shipped beside it, [`shipped`]) described by a [`Manifest`] stored as
//! `release.json` at the tree's root.
//! The manifest's canonical form is hashed into the tree digest that names the
//! installed snapshot directory, so the same bytes always land in the same
//! place and a modified snapshot can never pass as the original.
//!
//! Around that: reproducible archives of a release tree ([`archive`]), the
//! `SHA256SUMS` list published beside them ([`checksums`]), safe extraction
//! that checks the archive's checksum before parsing it ([`extract`]),
//! bounded fetching from a path or URL ([`fetch`]), and finding a published
//! release for this target ([`update`]). Nothing here prints or exits.

// Visibility is a design statement: an item another crate does not use is
// `pub(crate)`, so the compiler reports what nothing uses.
#![warn(unreachable_pub)]

pub mod archive;
pub mod checksums;
pub(crate) mod extract;
pub mod fetch;
pub mod glibc;
mod identity;
mod manifest;
pub(crate) mod shipped;
pub mod update;
pub mod verify;

pub use archive::{BuiltArchive, archive_name, build_archive, write_checksums};
pub use checksums::{CHECKSUMS_FILE, ChecksumError, Sha256Hex, Sha256Sums};
pub use extract::{ExtractError, Limits, extract_into, extract_release};
pub use fetch::{FetchError, FetchOptions, Location, fetch};
pub use identity::{BuildIdentity, date_from_epoch, utc_from_epoch};
pub use manifest::{
    Entry, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest, ManifestError, PRODUCT, sha256_file,
};
pub use shipped::{LICENSE_FILES, SHIPPED_FILE_MODE, release_entries};
