//! Examples for workspaces, threads, turns, the journal, backups,
//! permissions, budgets, `watch` and `ask`.

use super::Entry;

/// From `workspaces` to `ask`.
pub(super) const WORK: &[Entry] = &[
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
            (
                "Delete its threads first (owner's token)",
                "workspaces remove proj-fix --purge",
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
            (
                "One page of 100 (the next page's cursor on stderr)",
                "threads list --limit 100",
            ),
            (
                "The page after it, as JSON (its `next` is null after the last page)",
                "threads list --limit 100 --after c1.1765000000123.thr_9a1f --json",
            ),
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
        "threads delete",
        &[
            (
                "Delete a thread's content; its receipt stays in the journal",
                "threads delete thr_9a1f",
            ),
            ("The receipt as JSON", "threads delete thr_9a1f --json"),
        ],
    ),
    (
        "threads export",
        &[
            (
                "Export a thread as a bundle",
                "threads export thr_9a1f -o thread.bundle",
            ),
            (
                "Verify a bundle offline, on any machine",
                "threads export --verify thread.bundle",
            ),
        ],
    ),
    (
        "threads import",
        &[
            (
                "Import a bundle into the workspace registered at its path",
                "threads import thread.bundle",
            ),
            (
                "Import it into a named workspace",
                "threads import thread.bundle --workspace ws_3c1d",
            ),
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
];
