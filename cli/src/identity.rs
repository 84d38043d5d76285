//! This binary's build identity, fixed at compile time by `build.rs`.

use lapis_release::BuildIdentity;

/// The identity compiled into this binary.
pub(crate) fn build_identity() -> BuildIdentity {
    BuildIdentity {
        version: option_env!("LAPIS_BUILD_VERSION")
            .unwrap_or(env!("CARGO_PKG_VERSION"))
            .to_owned(),
        commit: option_env!("LAPIS_BUILD_COMMIT")
            .filter(|c| !c.is_empty())
            .unwrap_or("dev")
            .to_owned(),
        date: option_env!("LAPIS_BUILD_EPOCH")
            .and_then(|secs| secs.parse().ok())
            .map_or_else(|| "dev".to_owned(), lapis_release::date_from_epoch),
        target: env!("LAPIS_BUILD_TARGET").to_owned(),
    }
}
