//! Examples for installing, the service, tokens, providers and configuration.

use super::Entry;

/// From the top level to `doctor`.
pub(super) const MACHINE: &[Entry] = &[
    (
        "",
        &[
            (
                "Install, start the service and ask an agent here",
                "install",
            ),
            ("", "ask \"say hello\""),
            ("Watch every workspace live", "watch"),
        ],
    ),
    (
        "install",
        &[
            (
                "Install this executable and start the user service",
                "install",
            ),
            (
                "Where no service manager runs (containers, WSL, CI)",
                "install --start background",
            ),
            (
                "Install a downloaded release, checked against its SHA256SUMS",
                "install --from lapis-ai-controller-0.1.0-x86_64-unknown-linux-gnu.tar.gz --checksums SHA256SUMS",
            ),
        ],
    ),
    (
        "uninstall",
        &[
            (
                "Remove the launcher, unit and snapshots; keep config and data",
                "uninstall",
            ),
            (
                "Remove everything, configuration and controller home too",
                "uninstall --purge",
            ),
        ],
    ),
    (
        "releases",
        &[
            ("List the installed snapshots", "releases list"),
            (
                "Remove all but the two newest unprotected snapshots",
                "releases gc",
            ),
        ],
    ),
    (
        "releases list",
        &[
            (
                "The snapshots, with the active and previous marked",
                "releases list",
            ),
            ("As JSON", "releases list --json"),
        ],
    ),
    (
        "releases gc",
        &[
            (
                "Keep two old snapshots besides the protected ones",
                "releases gc",
            ),
            ("Keep none", "releases gc --keep 0"),
        ],
    ),
    (
        "rollback",
        &[
            (
                "Go back to the previous snapshot and restart the service",
                "rollback",
            ),
            (
                "Activate a named snapshot by a prefix of its digest",
                "rollback --to 3f9a2c",
            ),
        ],
    ),
    (
        "update",
        &[
            ("Is a newer release published?", "update --check"),
            ("Install the newest release", "update"),
            (
                "Install (or go back to) one version",
                "update --version 0.1.0",
            ),
        ],
    ),
    (
        "version",
        &[
            (
                "Version, commit, date, target and snapshot digest",
                "version",
            ),
            ("As JSON", "version --json"),
        ],
    ),
    ("token", &[("Print the bootstrap token", "token show")]),
    (
        "tokens",
        &[
            (
                "A token for the editor, its secret into a new 0600 file",
                "tokens add editor --application my-editor --output editor.token",
            ),
            ("List the tokens (never their secrets)", "tokens list"),
        ],
    ),
    (
        "tokens add",
        &[
            (
                "A token for the editor, its secret into a new 0600 file",
                "tokens add editor --application my-editor --output editor.token",
            ),
            (
                "Only workspace proj, only provider codex",
                "tokens add bot --application bot --workspace proj --provider codex --output bot.token",
            ),
        ],
    ),
    (
        "tokens list",
        &[
            ("Name, kind, applications and grants", "tokens list"),
            ("As JSON", "tokens list --json"),
        ],
    ),
    (
        "tokens revoke",
        &[("End a token's sessions at once", "tokens revoke editor")],
    ),
    (
        "contexts",
        &[
            ("Name a build box", "contexts add box ssh://me@build-box"),
            ("Talk to it from now on", "contexts use box"),
            ("This host again", "contexts use default"),
        ],
    ),
    (
        "contexts add",
        &[(
            "A host on another port",
            "contexts add box ssh://me@build-box:2222",
        )],
    ),
    (
        "contexts use",
        &[
            ("Every client command goes to box", "contexts use box"),
            ("Back to this host", "contexts use default"),
        ],
    ),
    (
        "contexts list",
        &[
            ("The contexts, `*` the one in use", "contexts list"),
            ("As JSON", "contexts list --json"),
        ],
    ),
    ("contexts remove", &[("Forget one", "contexts remove box")]),
    (
        "dial-stdio",
        &[(
            "What `--host ssh://box` runs on box (not typed by hand)",
            "dial-stdio",
        )],
    ),
    (
        "token show",
        &[
            ("Print the bootstrap token", "token show"),
            ("As JSON", "token show --json"),
        ],
    ),
    (
        "completions",
        &[
            (
                "Bash",
                "completions bash > ~/.local/share/bash-completion/completions/lapis-ai-controller",
            ),
            (
                "Fish",
                "completions fish > ~/.config/fish/completions/lapis-ai-controller.fish",
            ),
        ],
    ),
    (
        "serve",
        &[
            ("Run the controller in the foreground", "serve"),
            (
                "Detach without a service manager (stop it with `stop`)",
                "serve --background",
            ),
            (
                "An instance of its own, in its own home",
                "--instance test serve --home /tmp/lapis-test",
            ),
        ],
    ),
    (
        "stop",
        &[
            ("Stop the controller `serve --background` started", "stop"),
            ("Of one instance", "--instance test stop"),
        ],
    ),
    (
        "status",
        &[
            ("Is it running, and what is it doing?", "status"),
            ("For scripts (exit 3 when unreachable)", "status --json"),
        ],
    ),
    (
        "logs",
        &[
            ("The last 100 lines of the service log", "logs"),
            ("Follow it", "logs -f -n 20"),
        ],
    ),
    (
        "doctor",
        &[
            (
                "Check the installation, service, config and providers",
                "doctor",
            ),
            ("As JSON (exit 1 when a check fails)", "doctor --json"),
        ],
    ),
];

/// Providers and configuration.
pub(super) const SETUP: &[Entry] = &[
    (
        "providers",
        &[
            (
                "The catalogue and the configured providers",
                "providers list",
            ),
            ("Add one from the catalogue", "providers add codex"),
        ],
    ),
    (
        "providers list",
        &[
            (
                "Which agents are configured, and found on PATH",
                "providers list",
            ),
            ("As JSON", "providers list --json"),
        ],
    ),
    (
        "providers add",
        &[
            (
                "A catalogue entry, its key read from a hidden prompt",
                "providers add claude --secret ANTHROPIC_API_KEY",
            ),
            (
                "Your own ACP agent",
                "providers add mine --command /opt/agent/bin/acp --arg --stdio",
            ),
        ],
    ),
    (
        "providers remove",
        &[("Remove a configured provider", "providers remove mine")],
    ),
    (
        "providers check",
        &[
            (
                "Start the agent in a scratch directory and report what it supports",
                "providers check codex",
            ),
            (
                "Also open a session (checks login)",
                "providers check codex --session",
            ),
            (
                "Probe whether the agent honours a rejected write (needs the service)",
                "providers check codex --policy",
            ),
        ],
    ),
    (
        "config",
        &[
            ("Where the configuration is", "config path"),
            (
                "Check it, then make the service re-read it",
                "config validate",
            ),
            ("", "config reload"),
        ],
    ),
    (
        "config path",
        &[("Print the configuration file's path", "config path")],
    ),
    (
        "config show",
        &[
            ("The effective configuration, secrets masked", "config show"),
            ("As JSON", "config show --json"),
        ],
    ),
    (
        "config validate",
        &[(
            "Check the file and the env file; errors name the field",
            "config validate",
        )],
    ),
    (
        "config schema",
        &[(
            "The JSON Schema, for an editor",
            "config schema > config.schema.json",
        )],
    ),
    (
        "config reload",
        &[(
            "Make the running service re-read its config",
            "config reload",
        )],
    ),
];
