//! Help that teaches: the clap command tree with an *Examples* section on
//! every command (from [`super::examples::examples`]) and the top-level
//! help's commands grouped by what they are for.
//!
//! clap has no subcommand groups, so the top level gets a `help_template`
//! whose command sections are written here from the tree itself (each
//! command's name and `about`, in [`GROUPS`] order), followed by clap's own
//! `{options}`; below the top level clap's default layout stays, with the
//! global options under their own heading (`help_heading` in `global.rs`).
//!
//! What must stay true: every visible top-level command is in exactly one
//! group and every visible command has examples (unit tests below), so a new
//! command cannot ship without either.

use clap::builder::StyledStr;
use clap::{Command, CommandFactory};

use super::Cli;
use super::examples::examples;

/// The top-level groups: heading and command names, in display order.
const GROUPS: &[(&str, &[&str])] = &[
    (
        "Agent commands",
        &[
            "ask",
            "watch",
            "workspaces",
            "threads",
            "turns",
            "journal",
            "permissions",
            "budgets",
            "providers",
        ],
    ),
    (
        "Service commands",
        &[
            "serve",
            "stop",
            "status",
            "logs",
            "doctor",
            "config",
            "token",
            "tokens",
            "backup",
            "contexts",
            "dial-stdio",
        ],
    ),
    (
        "Install commands",
        &[
            "install",
            "update",
            "rollback",
            "releases",
            "uninstall",
            "version",
            "completions",
            "help",
        ],
    ),
];

/// Where the top-level command descriptions wrap.
const WIDTH: usize = 100;

/// The CLI's command tree as users see it.
pub(crate) fn command() -> Command {
    let mut cmd = with_examples(Cli::command(), "");
    let template = top_level_template(&cmd);
    cmd = cmd.help_template(template);
    cmd
}

/// `cmd` (at `path`) and its subcommands with their Examples sections.
fn with_examples(mut cmd: Command, path: &str) -> Command {
    if let Some(text) = examples_of(path) {
        cmd = cmd.after_help(text);
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in names {
        let sub = if path.is_empty() {
            name.clone()
        } else {
            format!("{path} {name}")
        };
        cmd = cmd.mut_subcommand(&name, |s| with_examples(s, &sub));
    }
    cmd
}

fn heading(text: &str) -> String {
    let h = clap::builder::styling::Styles::default()
        .get_header()
        .to_owned();
    format!("{h}{text}:{h:#}")
}

/// The Examples section of the command at `path`, when it has one.
fn examples_of(path: &str) -> Option<StyledStr> {
    let (_, list) = examples().find(|(p, _)| *p == path)?;
    let mut text = heading("Examples");
    for (what, line) in *list {
        if !what.is_empty() {
            text.push_str(&format!("\n  # {what}"));
        }
        text.push_str(&format!("\n  lapis-ai-controller {line}"));
    }
    Some(StyledStr::from(text))
}

/// The top-level template: about, usage, the grouped commands, options,
/// examples.
fn top_level_template(cmd: &Command) -> StyledStr {
    let width = GROUPS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|n| n.len())
        .max()
        .unwrap_or(0);
    let mut text = String::from("{about-with-newline}\n{usage-heading} {usage}\n");
    for (title, names) in GROUPS {
        text.push('\n');
        text.push_str(&heading(title));
        text.push('\n');
        for name in *names {
            let about = if *name == "help" {
                "Print this message or the help of the given subcommand(s)".to_owned()
            } else {
                cmd.find_subcommand(name)
                    .and_then(Command::get_about)
                    .map(|a| a.to_string())
                    .unwrap_or_default()
            };
            let lead = format!("  {name:<width$}  ");
            text.push_str(&wrap(&lead, &about));
        }
    }
    text.push('\n');
    text.push_str(&heading("Options"));
    text.push_str("\n{options}{after-help}");
    StyledStr::from(text)
}

/// `lead` then `about` wrapped at [`WIDTH`], continuation lines indented
/// under the text.
fn wrap(lead: &str, about: &str) -> String {
    let indent = " ".repeat(lead.len());
    let mut out = String::from(lead);
    let mut col = lead.len();
    let mut first = true;
    for word in about.split_whitespace() {
        if !first && col + 1 + word.len() > WIDTH {
            out.push('\n');
            out.push_str(&indent);
            col = indent.len();
            first = true;
        }
        if !first {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += word.len();
        first = false;
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::{GROUPS, command, examples};

    /// Every visible command's path ("" for the top level).
    fn paths(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_owned());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let next = if path.is_empty() {
                sub.get_name().to_owned()
            } else {
                format!("{path} {}", sub.get_name())
            };
            paths(sub, &next, out);
        }
    }

    /// A command line split like a shell would, up to a pipe or redirect.
    fn words(line: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                '|' | '>' if !quoted => break,
                ' ' if !quoted => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        words
    }

    #[test]
    fn every_visible_command_has_examples_and_every_example_parses() {
        let mut all = Vec::new();
        paths(&command(), "", &mut all);
        for path in &all {
            assert!(
                examples().any(|(p, _)| p == path),
                "`{path}` has no examples"
            );
        }
        for (path, list) in examples() {
            assert!(
                all.iter().any(|p| p == path),
                "examples for unknown `{path}`"
            );
            for (_, line) in *list {
                let mut argv = vec!["lapis-ai-controller".to_owned()];
                argv.extend(words(line));
                if let Err(e) = command().try_get_matches_from(&argv) {
                    panic!("example `{line}` does not parse: {e}");
                }
                let named: Vec<&str> = path.split_whitespace().collect();
                assert!(
                    argv.windows(named.len().max(1))
                        .any(|w| named.is_empty() || w == named),
                    "example `{line}` is not of `{path}`"
                );
            }
        }
    }

    #[test]
    fn every_visible_top_level_command_is_in_exactly_one_group() {
        let cmd = command();
        let mut names: Vec<&str> = cmd
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| s.get_name())
            .collect();
        names.push("help");
        for name in &names {
            let n = GROUPS.iter().filter(|(_, g)| g.contains(name)).count();
            assert_eq!(n, 1, "`{name}` is in {n} groups");
        }
        for (_, group) in GROUPS {
            for name in *group {
                assert!(names.contains(name), "group names unknown `{name}`");
            }
        }
    }
}
