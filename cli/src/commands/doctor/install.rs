//! The installation's checks: the launcher (ours, first on `PATH`, its
//! snapshot verifying), the service unit (installed, enabled, active) and
//! lingering.
//!
//! What must stay true: each check reads and reports, never repairs; one
//! that cannot tell says `warn` with the command that settles it.

use std::path::{Path, PathBuf};

use lapis_installer::inspect::{self, UnitState};
use lapis_installer::launcher::{self, LauncherState};
use lapis_installer::paths::{PRODUCT, Paths, ServiceKind};
use lapis_installer::{snapshot, unit};

use super::{Check, Status};

/// The launcher exists, is ours, is what `PATH` finds first, and its
/// snapshot verifies.
pub(super) fn launcher_checks(paths: &Paths, checks: &mut Vec<Check>) {
    let shown = paths.launcher.display().to_string();
    let digest = match launcher::state(paths) {
        Ok(LauncherState::Ours { digest }) => digest,
        Ok(LauncherState::Missing) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("no launcher at {shown}"),
                format!("run `{PRODUCT} install`"),
            ));
            return;
        }
        Ok(LauncherState::Foreign { what, .. }) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("{shown} is {what}, not an installed launcher"),
                format!("run `{PRODUCT} install --force` to replace it"),
            ));
            return;
        }
        Err(e) => {
            checks.push(Check::bad(
                Status::Fail,
                "launcher",
                format!("cannot read {shown}: {e}"),
                format!("run `{PRODUCT} install`"),
            ));
            return;
        }
    };
    let dir = paths.launcher.parent().unwrap_or(Path::new("/"));
    checks.push(match first_on_path(PRODUCT) {
        Some(found) if same_file(&found, &paths.launcher) => {
            Check::ok("launcher", format!("{shown} is on PATH"))
        }
        Some(found) => Check::bad(
            Status::Warn,
            "launcher",
            format!(
                "`{PRODUCT}` on PATH is {}, not the launcher {shown}",
                found.display()
            ),
            format!(
                "put {} before {} in PATH, or remove the other copy",
                dir.display(),
                found.parent().unwrap_or(Path::new("/")).display()
            ),
        ),
        None => Check::bad(
            Status::Warn,
            "launcher",
            format!("{shown} is not on PATH"),
            format!(
                "add it to your shell profile: export PATH=\"{}:$PATH\"",
                dir.display()
            ),
        ),
    });
    let short = &digest[..12.min(digest.len())];
    checks.push(match snapshot::verify(paths, &digest) {
        Ok(manifest) => Check::ok(
            "snapshot",
            format!(
                "releases/{short}… verifies (version {})",
                manifest.build.version
            ),
        ),
        Err(e) => Check::bad(
            Status::Fail,
            "snapshot",
            format!("active snapshot {short}… does not verify: {e}"),
            format!("run `{PRODUCT} rollback` or reinstall with `{PRODUCT} install`"),
        ),
    });
}

/// The first `PATH` entry holding an executable named `name`.
fn first_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The unit file, what the service manager says about it, and lingering.
pub(super) fn service_checks(paths: &Paths, checks: &mut Vec<Check>) {
    let name = &paths.unit.name;
    let by_hand = unit::serve_command_line(paths);
    let shown = paths.unit.path.display();
    let Ok(current) = std::fs::read(&paths.unit.path) else {
        checks.push(Check::bad(
            Status::Fail,
            "unit",
            format!("no service unit at {shown}"),
            format!("run `{PRODUCT} install` (or run the controller by hand: `{by_hand}`)"),
        ));
        return;
    };
    let expected = match paths.unit.kind {
        ServiceKind::Systemd => unit::systemd_unit(paths),
        ServiceKind::Launchd => unit::launchd_plist(paths),
    };
    checks.push(match expected {
        Ok(text) if text.as_bytes() == current => {
            Check::ok("unit", format!("{shown} is installed"))
        }
        _ => Check::bad(
            Status::Warn,
            "unit",
            format!("{shown} differs from what this version writes"),
            format!("run `{PRODUCT} install` to rewrite it"),
        ),
    });
    let (enable, start) = match paths.unit.kind {
        ServiceKind::Systemd => (
            format!("systemctl --user enable {name}"),
            format!("systemctl --user start {name}"),
        ),
        ServiceKind::Launchd => {
            let bootstrap = format!(
                "launchctl bootstrap gui/$(id -u) {}",
                paths.unit.path.display()
            );
            (bootstrap.clone(), bootstrap)
        }
    };
    match inspect::unit_state(paths) {
        Ok(state) => push_unit_state(&state, &enable, &start, checks),
        Err(e) => checks.push(Check::bad(
            Status::Fail,
            "service",
            format!("cannot ask the service manager: {e}"),
            format!("run the controller by hand: `{by_hand}`"),
        )),
    }
    if paths.unit.kind == ServiceKind::Systemd {
        checks.push(linger_check());
    }
}

fn push_unit_state(state: &UnitState, enable: &str, start: &str, checks: &mut Vec<Check>) {
    checks.push(if state.is_enabled() {
        Check::ok("enabled", format!("the unit is {}", state.enabled))
    } else {
        Check::bad(
            Status::Fail,
            "enabled",
            format!("the unit is {} (it will not start at login)", state.enabled),
            format!("run `{enable}`"),
        )
    });
    checks.push(if state.is_active() {
        Check::ok("active", format!("the unit is {}", state.active))
    } else {
        Check::bad(
            Status::Fail,
            "active",
            format!("the unit is {}", state.active),
            format!("run `{start}`; `{PRODUCT} logs` shows why it stopped"),
        )
    });
}

/// Without lingering, systemd stops user services at logout.
fn linger_check() -> Check {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        });
    let Some(user) = user else {
        return Check::bad(
            Status::Warn,
            "linger",
            "cannot tell who the user is (USER is unset)",
            "run `loginctl enable-linger` so the service outlives a logout",
        );
    };
    match inspect::lingering(&user) {
        Ok(true) => Check::ok("linger", format!("lingering is on for {user}")),
        Ok(false) => Check::bad(
            Status::Warn,
            "linger",
            format!("lingering is off for {user}: the service stops at logout"),
            format!("run `loginctl enable-linger {user}`"),
        ),
        Err(e) => Check::bad(
            Status::Warn,
            "linger",
            format!("cannot check lingering: {e}"),
            format!("run `loginctl enable-linger {user}` so the service outlives a logout"),
        ),
    }
}
