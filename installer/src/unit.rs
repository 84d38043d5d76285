//! Service definitions: a systemd user unit (Linux) or a launchd agent plist
//! (macOS) that runs `<launcher> serve --config <config>`.
//!
//! The command is the *launcher*, not a snapshot path, so a later install or
//! rollback only has to restart the service to move it to the new release.
//! Both texts are pure functions of the paths, so they are unit-tested here
//! and the systemd one is also checked with `systemd-analyze verify` by the
//! end-to-end suite.

use thiserror::Error;

use crate::paths::{Paths, ServiceKind};

/// A path that cannot be written into a service definition.
#[derive(Debug, Error)]
#[error("{0} contains a control character and cannot be used in a service definition")]
pub struct UnitPathError(pub String);

/// The `serve` command line: launcher, `serve`, `--config <abs>` and, for a
/// named instance, `--instance NAME`.
pub fn serve_args(paths: &Paths) -> Vec<String> {
    let mut args = vec![
        paths.launcher.display().to_string(),
        "serve".to_owned(),
        "--config".to_owned(),
        paths.config.display().to_string(),
    ];
    if let Some(name) = paths.instance.name() {
        args.push("--instance".to_owned());
        args.push(name.to_owned());
    }
    args
}

/// The command a person can run instead of the service, shell-quoted.
pub fn serve_command_line(paths: &Paths) -> String {
    serve_args(paths)
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command that starts the installed service (for messages).
pub fn start_command(paths: &Paths) -> String {
    match paths.unit.kind {
        ServiceKind::Systemd => format!("systemctl --user start {}", paths.unit.name),
        ServiceKind::Launchd => format!("launchctl kickstart gui/$(id -u)/{}", paths.unit.name),
    }
}

/// The command that restarts the installed service, so it runs what the
/// launcher points at (for messages).
pub fn restart_command(paths: &Paths) -> String {
    match paths.unit.kind {
        ServiceKind::Systemd => format!("systemctl --user restart {}", paths.unit.name),
        ServiceKind::Launchd => {
            format!("launchctl kickstart -k gui/$(id -u)/{}", paths.unit.name)
        }
    }
}

/// The systemd user unit text.
///
/// - `Type=notify` (+ `NotifyAccess=main`): `serve` sends `READY=1` once its
///   socket accepts, so `systemctl restart` returns when clients can connect,
///   and `STOPPING=1` / `RELOADING=1` as it stops or reloads.
/// - `KillMode=mixed`: a stop sends SIGTERM to the controller alone, which
///   settles running turns and reaps each agent's process group itself; only
///   what is left after `TimeoutStopSec` gets SIGKILL.
/// - `EnvironmentFile=-…/env`: the optional env file beside the config; the
///   `-` keeps a missing file fine.
/// - `ExecReload` sends SIGHUP, on which `serve` re-reads its configuration.
/// - Hardening: only what a *user* unit can apply without namespaces
///   (prctl and seccomp, which the user manager sets up unprivileged) and
///   what agents never need, since they run in the user's workspaces with
///   node, npm, git and compilers: no privilege gain through setuid
///   binaries (`sudo` in an agent fails), no setuid files, no realtime
///   scheduling, no personality change, native system calls only, and
///   sockets of the local, internet and netlink families (glibc's
///   resolver uses netlink). Mount-namespace options (`ProtectSystem`,
///   `PrivateTmp`, `ProtectKernel*` …) are the opt-in [`STRICT_DROP_IN`]:
///   they confine where agents may write, and a user unit can only apply
///   them where unprivileged user namespaces are allowed. Not even opt-in:
///   `MemoryDenyWriteExecute` (breaks node's JIT), `RestrictNamespaces`
///   (breaks agents that sandbox themselves), `SystemCallFilter` (breaks
///   debuggers and containers agents run).
pub fn systemd_unit(paths: &Paths) -> Result<String, UnitPathError> {
    let exec = serve_args(paths)
        .iter()
        .map(|a| systemd_quote(a))
        .collect::<Result<Vec<_>, _>>()?
        .join(" ");
    Ok(format!(
        "# Written by `lapis-ai-controller install`; rewritten by each install.\n\
         [Unit]\n\
         Description=lapis-ai-controller (instance {instance})\n\
         Documentation=https://github.com/lapis-ai/lapis-ai-controller\n\
         \n\
         [Service]\n\
         Type=notify\n\
         NotifyAccess=main\n\
         ExecStart={exec}\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         EnvironmentFile=-{env_file}\n\
         KillMode=mixed\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         TimeoutStopSec=30\n\
         UMask=0077\n\
         # Hardening a user unit can apply; more: the opt-in drop-in in docs/installing.md.\n\
         NoNewPrivileges=yes\n\
         RestrictSUIDSGID=yes\n\
         RestrictRealtime=yes\n\
         LockPersonality=yes\n\
         SystemCallArchitectures=native\n\
         RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        instance = paths.instance,
        env_file = systemd_path(&paths.env_file().display().to_string())?,
    ))
}

/// The opt-in hardening drop-in for the systemd user unit, for people
/// whose agent workspaces all live under their home (docs/installing.md
/// says where to put it): the file system read-only but for the home and
/// the runtime directory, a private `/tmp`, the kernel's tunables, modules,
/// logs, clock, hostname and control groups out of reach, other users'
/// processes hidden. A user unit gets these through a user namespace, so
/// the service does not start where unprivileged user namespaces are
/// forbidden; a workspace outside the home needs its own `ReadWritePaths=`
/// line.
pub const STRICT_DROP_IN: &str = "\
[Service]
ProtectSystem=strict
ReadWritePaths=%h %t
PrivateTmp=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
";

/// The launchd agent plist text.
pub fn launchd_plist(paths: &Paths) -> Result<String, UnitPathError> {
    let mut args = String::new();
    for arg in serve_args(paths) {
        check_printable(&arg)?;
        args.push_str(&format!("    <string>{}</string>\n", xml_escape(&arg)));
    }
    let log = paths.launchd_log().display().to_string();
    check_printable(&log)?;
    Ok(format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{label}</string>
  <key>ProgramArguments</key>
  <array>
{args}  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ProcessType</key>
  <string>Background</string>
  <key>Umask</key>
  <integer>63</integer>
  <key>StandardOutPath</key>
  <string>{log}</string>
  <key>StandardErrorPath</key>
  <string>{log}</string>
</dict>
</plist>
"#,
        label = xml_escape(&paths.unit.name),
        log = xml_escape(&log),
    ))
}

fn check_printable(s: &str) -> Result<(), UnitPathError> {
    if s.chars().any(char::is_control) {
        return Err(UnitPathError(s.escape_debug().to_string()));
    }
    Ok(())
}

/// One systemd command-line word: double-quoted, with `\` and `"` escaped and
/// the specifier `%` and variable `$` characters doubled.
fn systemd_quote(s: &str) -> Result<String, UnitPathError> {
    check_printable(s)?;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// A path as a whole-line systemd setting (`EnvironmentFile=`): not quoted
/// (the value is the rest of the line), specifiers doubled; it must not end
/// in whitespace or a backslash, which the unit parser would strip or read as
/// a line continuation.
fn systemd_path(s: &str) -> Result<String, UnitPathError> {
    check_printable(s)?;
    if s.ends_with(char::is_whitespace) || s.ends_with('\\') {
        return Err(UnitPathError(s.escape_debug().to_string()));
    }
    Ok(s.replace('%', "%%"))
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// POSIX shell single quoting, only where needed.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether a file name in the unit directory is one of our units (for uninstall's check of
/// other instances).
pub fn is_our_unit_name(name: &str) -> bool {
    let product = crate::paths::PRODUCT;
    (name == format!("{product}.service")
        || (name.starts_with(&format!("{product}-")) && name.ends_with(".service")))
        || name.starts_with("ai.lapis.controller") && name.ends_with(".plist")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::PathOptions;

    fn paths(instance: Option<&str>, kind: ServiceKind, home: &str) -> Paths {
        Paths::resolve(&PathOptions {
            home: home.into(),
            cwd: "/".into(),
            instance: instance.map(str::to_owned),
            service_kind: Some(kind),
            ..PathOptions::default()
        })
        .unwrap()
    }

    #[test]
    fn systemd_unit_runs_the_launcher_with_the_config() {
        let p = paths(None, ServiceKind::Systemd, "/home/u");
        let unit = systemd_unit(&p).unwrap();
        assert!(unit.contains(
            "ExecStart=\"/home/u/.local/bin/lapis-ai-controller\" \"serve\" \"--config\" \"/home/u/.config/lapis-ai-controller/config.json\"\n"
        ), "{unit}");
        assert!(unit.contains("Restart=on-failure\n"));
        assert!(unit.contains("WantedBy=default.target\n"));
        let named = systemd_unit(&paths(Some("w1"), ServiceKind::Systemd, "/home/u")).unwrap();
        assert!(named.contains("\"--instance\" \"w1\"\n"), "{named}");
        assert!(named.contains("instances/w1/config.json"), "{named}");
        assert!(
            named.contains(
                "EnvironmentFile=-/home/u/.config/lapis-ai-controller/instances/w1/env\n"
            ),
            "{named}"
        );
    }

    #[test]
    fn systemd_unit_notifies_reloads_and_stops_the_controller_first() {
        let unit = systemd_unit(&paths(None, ServiceKind::Systemd, "/home/u")).unwrap();
        for line in [
            "Type=notify",
            "NotifyAccess=main",
            "KillMode=mixed",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "EnvironmentFile=-/home/u/.config/lapis-ai-controller/env",
        ] {
            assert!(unit.lines().any(|l| l == line), "missing {line}:\n{unit}");
        }
        assert!(!unit.contains("Type=simple"));
        // The hardening a user unit can apply, and none that would break
        // agents (node's JIT, self-sandboxing agents) or need namespaces.
        for line in [
            "NoNewPrivileges=yes",
            "RestrictSUIDSGID=yes",
            "RestrictRealtime=yes",
            "LockPersonality=yes",
            "SystemCallArchitectures=native",
            "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
        ] {
            assert!(unit.lines().any(|l| l == line), "missing {line}:\n{unit}");
        }
        for never in [
            "MemoryDenyWriteExecute",
            "RestrictNamespaces",
            "SystemCallFilter",
            "ProtectSystem",
            "PrivateTmp",
        ] {
            assert!(
                !unit.contains(never),
                "{never} in the default unit:\n{unit}"
            );
        }
        // Specifiers in the env file path are doubled; a trailing space or
        // backslash cannot be written at all.
        let odd = systemd_unit(&paths(None, ServiceKind::Systemd, "/home/50%")).unwrap();
        assert!(
            odd.contains("EnvironmentFile=-/home/50%%/.config/"),
            "{odd}"
        );
        assert!(systemd_path("/a/b ").is_err());
        assert!(systemd_path("/a/b\\").is_err());
        assert_eq!(systemd_path("/a b/c").unwrap(), "/a b/c");
    }

    #[test]
    fn the_installing_guide_gives_the_drop_in_as_it_is_here() {
        let guide = include_str!("../../docs/installing.md");
        assert!(
            guide.contains(&format!("```ini\n{STRICT_DROP_IN}```")),
            "docs/installing.md must quote STRICT_DROP_IN verbatim"
        );
        let unit = systemd_unit(&paths(None, ServiceKind::Systemd, "/home/u")).unwrap();
        for line in unit
            .lines()
            .filter(|l| l.starts_with("Restrict") || l.starts_with("NoNew"))
        {
            assert!(guide.contains(line), "docs/installing.md lacks {line}");
        }
    }

    #[test]
    fn systemd_quoting_escapes_specials() {
        assert_eq!(
            systemd_quote("/a b/%h$X\"\\").unwrap(),
            r#""/a b/%%h$$X\"\\""#
        );
        assert!(systemd_quote("a\nb").is_err());
        let p = paths(None, ServiceKind::Systemd, "/home/a\nb");
        assert!(systemd_unit(&p).is_err());
    }

    #[test]
    fn launchd_plist_lists_arguments() {
        let p = paths(Some("w1"), ServiceKind::Launchd, "/Users/u&v");
        let plist = launchd_plist(&p).unwrap();
        assert!(
            plist.contains("<string>ai.lapis.controller.w1</string>"),
            "{plist}"
        );
        assert!(plist.contains("<string>/Users/u&amp;v/.local/bin/lapis-ai-controller</string>"));
        assert!(plist.contains("<string>serve</string>\n    <string>--config</string>"));
        assert!(plist.contains("<string>--instance</string>\n    <string>w1</string>"));
        assert!(plist.contains("<key>RunAtLoad</key>\n  <true/>"));
    }

    /// Reverses `systemd_quote` the way systemd reads a quoted word.
    fn systemd_unquote(q: &str) -> Option<String> {
        let inner = q.strip_prefix('"')?.strip_suffix('"')?;
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?),
                '"' => return None,
                '%' | '$' => {
                    if chars.next()? != c {
                        return None;
                    }
                    out.push(c);
                }
                c => out.push(c),
            }
        }
        Some(out)
    }

    proptest::proptest! {
        #[test]
        fn systemd_quoting_round_trips(s in "[ -~]{0,40}") {
            let q = systemd_quote(&s).unwrap();
            proptest::prop_assert_eq!(systemd_unquote(&q), Some(s));
        }

        #[test]
        fn shell_quoting_is_one_word(s in "[ -~]{0,40}") {
            let q = shell_quote(&s);
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf '%s' {q}"))
                .output()
                .unwrap();
            proptest::prop_assert_eq!(String::from_utf8_lossy(&out.stdout), s);
        }
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("/a/b-c"), "/a/b-c");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let p = paths(None, ServiceKind::Systemd, "/home/u");
        assert_eq!(
            serve_command_line(&p),
            "/home/u/.local/bin/lapis-ai-controller serve --config /home/u/.config/lapis-ai-controller/config.json"
        );
    }

    #[test]
    fn start_and_restart_commands_name_the_unit() {
        let p = paths(Some("w1"), ServiceKind::Systemd, "/home/u");
        assert_eq!(
            start_command(&p),
            "systemctl --user start lapis-ai-controller-w1.service"
        );
        assert_eq!(
            restart_command(&p),
            "systemctl --user restart lapis-ai-controller-w1.service"
        );
        let p = paths(None, ServiceKind::Launchd, "/Users/u");
        assert_eq!(
            restart_command(&p),
            "launchctl kickstart -k gui/$(id -u)/ai.lapis.controller"
        );
    }

    #[test]
    fn unit_names() {
        assert!(is_our_unit_name("lapis-ai-controller.service"));
        assert!(is_our_unit_name("lapis-ai-controller-w1.service"));
        assert!(is_our_unit_name("ai.lapis.controller.w1.plist"));
        assert!(!is_our_unit_name("other.service"));
    }
}
