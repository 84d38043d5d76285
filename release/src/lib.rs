//! `lapis-release`: what a release *is*, independent of how it is installed.
//!
//! A release is a tree (`bin/lapis-ai-controller` plus anything shipped beside
//! it) described by a [`Manifest`] stored as `release.json` at the tree's root.
//! The manifest's canonical form is hashed into the tree digest that names the
//! installed snapshot directory, so the same bytes always land in the same
//! place and a modified snapshot can never pass as the original.

mod identity;
mod manifest;

pub use identity::BuildIdentity;
pub use manifest::{
    Entry, MANIFEST_FILE, MANIFEST_SCHEMA, Manifest, ManifestError, PRODUCT, sha256_file,
};
