//! The *Examples* section of every command's help, as one table: a command
//! path (`"turns submit"`) and the invocations shown for it, each a comment
//! saying what it does and the command line. Declarative on purpose, so the
//! examples read together and a unit test can check that every visible
//! command has some and every entry names a real command.
//!
//! What must stay true: every example is a real invocation of the current
//! command tree (the unit test parses each one with the real parser), and
//! ids in them are the shapes the service prints (`thr_…`, `turn_…` or a
//! prefix of one).

/// `(command path, [(what it does, command line without the binary name)])`.
pub(super) const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
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
    (
        "workspaces",
        &[
            (
                "Register a project directory",
                "workspaces add proj ~/src/proj",
            ),
            ("List them", "workspaces list"),
        ],
    ),
    (
        "workspaces add",
        &[
            (
                "Register a project directory as `proj`",
                "workspaces add proj ~/src/proj",
            ),
            (
                "A new git worktree of it, on branch lapis/proj-fix",
                "workspaces add proj-fix --worktree-of ~/src/proj",
            ),
        ],
    ),
    (
        "workspaces list",
        &[
            (
                "A table on a terminal, tab-separated when piped",
                "workspaces list",
            ),
            (
                "As JSON, with the turns fencing any of them",
                "workspaces list --json",
            ),
        ],
    ),
    (
        "workspaces remove",
        &[
            (
                "Unregister a workspace added at run time",
                "workspaces remove proj-fix",
            ),
            (
                "And delete its worktree",
                "workspaces remove proj-fix --delete-worktree",
            ),
        ],
    ),
    (
        "threads",
        &[
            (
                "Open a thread on workspace `proj` with the codex provider",
                "threads create proj --provider codex",
            ),
            ("List threads", "threads list"),
        ],
    ),
    (
        "threads create",
        &[
            (
                "Open a thread (prints its id)",
                "threads create proj --provider codex",
            ),
            (
                "One that never auto-approves",
                "threads create proj --restricted",
            ),
            (
                "One whose turns stop being claimed after 2 million tokens",
                "threads create proj --budget-tokens 2000000",
            ),
        ],
    ),
    (
        "threads configure",
        &[(
            "Switch a thread to another provider (version from `threads show`)",
            "threads configure thr_9a1f --expected-version 1 --provider claude",
        )],
    ),
    (
        "threads list",
        &[
            ("Threads, newest activity as an age", "threads list"),
            ("Only the ids", "threads list | cut -f1"),
        ],
    ),
    (
        "threads show",
        &[
            ("A thread by a prefix of its id", "threads show thr_9a1f"),
            ("As JSON", "threads show thr_9a1f --json"),
        ],
    ),
    (
        "turns",
        &[
            (
                "Submit a prompt and stream the reply",
                "turns submit thr_9a1f --prompt \"fix the tests\" --follow",
            ),
            ("Turns of one thread", "turns list --thread thr_9a1f"),
        ],
    ),
    (
        "turns submit",
        &[
            (
                "Submit and wait for the reply",
                "turns submit thr_9a1f --prompt \"fix the tests\" --wait",
            ),
            (
                "Stream it, the prompt from a file, at most 10 minutes",
                "turns submit thr_9a1f --prompt-file task.md --follow --timeout 10m",
            ),
            (
                "From stdin, as NDJSON",
                "turns submit thr_9a1f --prompt - --follow --json",
            ),
        ],
    ),
    (
        "turns continue",
        &[(
            "Continue a settled turn with new instructions",
            "turns continue turn_4b2e --prompt \"now the docs\" --follow",
        )],
    ),
    (
        "turns list",
        &[
            ("Every turn", "turns list"),
            (
                "Of one thread, as JSON",
                "turns list --thread thr_9a1f --json",
            ),
        ],
    ),
    (
        "turns show",
        &[
            ("A turn by a prefix of its id", "turns show turn_4b2e"),
            (
                "The turn of a submit whose answer was lost",
                "turns show --command-id cmd_1",
            ),
        ],
    ),
    (
        "turns cancel",
        &[("Ask the agent to stop a turn", "turns cancel turn_4b2e")],
    ),
    (
        "turns resolve",
        &[(
            "Settle a fenced turn whose agent you know is stopped",
            "turns resolve turn_4b2e --as failed --confirm-stopped",
        )],
    ),
    (
        "journal",
        &[
            ("The last events of every thread", "journal tail"),
            ("Check the journal's hash chain", "journal verify"),
        ],
    ),
    (
        "journal tail",
        &[
            (
                "The last 50 events of one thread, with times",
                "journal tail thr_9a1f -n 50",
            ),
            (
                "Follow everything as NDJSON",
                "journal tail --follow --json",
            ),
        ],
    ),
    (
        "journal verify",
        &[("Check the hash chain (read-only)", "journal verify")],
    ),
    (
        "journal reanchor",
        &[(
            "Accept a controller.db copied back by hand, with serve stopped",
            "journal reanchor",
        )],
    ),
    (
        "backup",
        &[
            ("Back the database up now (serve may run)", "backup create"),
            ("The backups, oldest first", "backup list"),
        ],
    ),
    (
        "backup create",
        &[("As JSON, for scripts", "backup create --json")],
    ),
    ("backup list", &[("As JSON", "backup list --json")]),
    (
        "backup restore",
        &[(
            "Put a backup back, with serve stopped",
            "backup restore 20261202T214500Z-manual",
        )],
    ),
    (
        "permissions",
        &[
            ("What agents are waiting for", "permissions list"),
            (
                "Allow one request once",
                "permissions respond turn_4b2e perm-0 --allow",
            ),
        ],
    ),
    (
        "permissions list",
        &[
            (
                "Pending requests with their options and deadlines",
                "permissions list",
            ),
            (
                "Of one turn, as JSON",
                "permissions list --turn turn_4b2e --json",
            ),
        ],
    ),
    (
        "permissions respond",
        &[
            ("Allow once", "permissions respond turn_4b2e perm-0 --allow"),
            (
                "Reject with an option id from `permissions list`",
                "permissions respond turn_4b2e perm-0 opt-reject_once",
            ),
        ],
    ),
    (
        "budgets",
        &[
            ("Budgets and what was spent", "budgets show"),
            ("Count one from now", "budgets reset workspace:proj:day"),
        ],
    ),
    (
        "budgets show",
        &[
            ("Each budget with its spending", "budgets show"),
            ("As JSON", "budgets show --json"),
        ],
    ),
    (
        "budgets reset",
        &[(
            "Count a budget's spending from now",
            "budgets reset workspace:proj:day",
        )],
    ),
    (
        "watch",
        &[
            ("The live view (q quits, ? lists the keys)", "watch"),
            ("Of another instance", "--instance test watch"),
        ],
    ),
    (
        "ask",
        &[
            (
                "Ask the agent in the current directory",
                "ask \"why does the build fail?\"",
            ),
            (
                "In another directory, with a provider, on a new thread",
                "ask --dir ~/src/proj --provider claude --new \"review main.rs\"",
            ),
            (
                "Unattended: approve every request, stop after 10 minutes",
                "ask --approve-all --timeout 10m \"run the tests\"",
            ),
        ],
    ),
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
